package berthmsg

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ForgetShareGroupKey is the API key of BerthForgetShareGroup.
const ForgetShareGroupKey int16 = 32001

// ForgetShareGroupName is the API's name, as kmsg.NameForKey would spell
// it.
const ForgetShareGroupName = "BerthForgetShareGroup"

// ForgetShareGroupRequest tells a broker that a share group was deleted:
// it drops what it holds of the group in memory (its share-partitions'
// in-flight state, their timers and the group's share sessions). The
// group's coordinator sends it to every other live broker during
// DeleteGroups, after the group's state was deleted at the share
// coordinators. Broker to broker; clients have no use for it.
//
// Version 0 is the only version and uses flexible encoding (KIP-482).
type ForgetShareGroupRequest struct {
	Version int16
	GroupID string
}

// NewForgetShareGroupRequest returns an empty request.
func NewForgetShareGroupRequest() *ForgetShareGroupRequest { return &ForgetShareGroupRequest{} }

func (*ForgetShareGroupRequest) Key() int16           { return ForgetShareGroupKey }
func (*ForgetShareGroupRequest) MaxVersion() int16    { return 0 }
func (r *ForgetShareGroupRequest) SetVersion(v int16) { r.Version = v }
func (r *ForgetShareGroupRequest) GetVersion() int16  { return r.Version }
func (*ForgetShareGroupRequest) IsFlexible() bool     { return true }
func (r *ForgetShareGroupRequest) ResponseKind() kmsg.Response {
	return &ForgetShareGroupResponse{Version: r.Version}
}

// AppendTo appends the request body.
func (r *ForgetShareGroupRequest) AppendTo(b []byte) []byte {
	b = appendString(b, r.GroupID)
	return append(b, 0) // tagged fields
}

// ReadFrom decodes the request body.
func (r *ForgetShareGroupRequest) ReadFrom(src []byte) error {
	d := decoder{b: src}
	r.GroupID = d.string()
	d.tags()
	return d.done()
}

// ForgetShareGroupResponse answers a ForgetShareGroupRequest: ErrorCode
// is INVALID_REQUEST for an empty group id, else 0.
type ForgetShareGroupResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
}

func (*ForgetShareGroupResponse) Key() int16           { return ForgetShareGroupKey }
func (*ForgetShareGroupResponse) MaxVersion() int16    { return 0 }
func (r *ForgetShareGroupResponse) SetVersion(v int16) { r.Version = v }
func (r *ForgetShareGroupResponse) GetVersion() int16  { return r.Version }
func (*ForgetShareGroupResponse) IsFlexible() bool     { return true }
func (r *ForgetShareGroupResponse) RequestKind() kmsg.Request {
	return &ForgetShareGroupRequest{Version: r.Version}
}

// Throttle implements kmsg.ThrottleResponse.
func (r *ForgetShareGroupResponse) Throttle() (int32, bool) { return r.ThrottleMillis, true }

// AppendTo appends the response body.
func (r *ForgetShareGroupResponse) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(r.ThrottleMillis))
	b = binary.BigEndian.AppendUint16(b, uint16(r.ErrorCode))
	b = appendNullableString(b, r.ErrorMessage)
	return append(b, 0)
}

// ReadFrom decodes the response body.
func (r *ForgetShareGroupResponse) ReadFrom(src []byte) error {
	d := decoder{b: src}
	r.ThrottleMillis = d.int32()
	r.ErrorCode = d.int16()
	r.ErrorMessage = d.nullableString()
	d.tags()
	return d.done()
}
