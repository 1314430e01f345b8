package handler_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	tc "github.com/berthmq/berth/internal/testcluster"
)

// aclSeeds are valid DescribeAcls, CreateAcls and DeleteAcls requests at
// every version.
func aclSeeds() []kmsg.Request {
	var out []kmsg.Request
	for v := int16(0); v <= 3; v++ {
		d := kmsg.NewPtrDescribeACLsRequest()
		d.SetVersion(v)
		d.ResourceType, d.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeMatch
		d.ResourceName = kmsg.StringPtr("orders")
		d.Operation, d.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		c := kmsg.NewPtrCreateACLsRequest()
		c.SetVersion(v)
		c.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "ord",
			ResourcePatternType: kmsg.ACLResourcePatternTypePrefixed, Principal: "User:a", Host: "*",
			Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow}}
		del := kmsg.NewPtrDeleteACLsRequest()
		del.SetVersion(v)
		del.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeTopic, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
			Principal: kmsg.StringPtr("User:a"), Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
		out = append(out, d, c, del)
	}
	return out
}

// FuzzACLRequests sends arbitrary DescribeAcls, CreateAcls and DeleteAcls
// bodies to a broker with the authorizer on whose every connection is a
// super user, so they reach the filters, the validation and the metadata
// records: the broker answers with a decodable response (or closes the
// connection on an undecodable body), never panics, and keeps serving.
func FuzzACLRequests(f *testing.F) {
	for _, r := range aclSeeds() {
		f.Add(byte(r.Key()-29), byte(r.GetVersion()), r.AppendTo(nil))
	}
	n := tc.Start(quietTB{f}, tc.With("authorizer.class.name", "berth"), tc.With("super.users", "User:ANONYMOUS"))
	addr := n.Addr()
	f.Fuzz(func(t *testing.T, sel, ver byte, body []byte) {
		key, version := 29+int16(sel%3), int16(ver%4)
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("broker not accepting: %v", err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write(frame(key, version, 7, req.IsFlexible(), body)); err != nil {
			t.Fatal(err)
		}
		_, resp, err := readResponse(c)
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err):
			dec := kmsg.RequestForKey(key)
			dec.SetVersion(version)
			if dec.ReadFrom(append([]byte(nil), body...)) == nil {
				t.Fatalf("key %d v%d: connection closed on a decodable request", key, version)
			}
		case err != nil:
			t.Fatalf("key %d v%d: %v", key, version, err)
		default:
			if req.IsFlexible() {
				if len(resp) == 0 || resp[0] != 0 {
					t.Fatalf("key %d v%d: flexible response without an empty tag section", key, version)
				}
				resp = resp[1:]
			}
			kr := req.ResponseKind()
			kr.SetVersion(version)
			if err := kr.ReadFrom(resp); err != nil {
				t.Fatalf("key %d v%d response undecodable: %v", key, version, err)
			}
		}
		if err := probe(addr); err != nil {
			t.Fatalf("broker stopped answering after key %d v%d: %v", key, version, err)
		}
	})
}
