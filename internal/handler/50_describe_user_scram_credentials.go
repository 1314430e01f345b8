package handler

// DescribeUserScramCredentials, version 0: each user's SCRAM mechanisms
// and iteration counts (never a salt or key). No users asked: every user
// with a credential. A user asked twice gets DUPLICATE_RESOURCE, one
// without credentials RESOURCE_NOT_FOUND, as Kafka answers.

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(50, 0, 0, (*Broker).describeUserScramCredentials) }

// scramMechanisms maps Kafka's ScramMechanism codes to names.
var scramMechanisms = map[int8]string{1: metadata.ScramSHA256, 2: metadata.ScramSHA512}

func scramMechanismCode(name string) int8 {
	for c, n := range scramMechanisms {
		if n == name {
			return c
		}
	}
	return 0
}

func (b *Broker) describeUserScramCredentials(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !b.authorizedCluster(req, kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("DESCRIBE on the cluster is needed to describe SCRAM users")
		return now(resp), nil
	}
	im := b.image()
	describe := func(user string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = user
		mechs := im.ScramUsers[user]
		if len(mechs) == 0 {
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = errMsg(&codedError{kerr.ResourceNotFound, "attempt to describe a user credential that does not exist: " + user})
			return res
		}
		for _, m := range slices.Sorted(maps.Keys(mechs)) {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = scramMechanismCode(m), mechs[m].Iterations
			res.CredentialInfos = append(res.CredentialInfos, ci)
		}
		return res
	}
	if len(r.Users) == 0 {
		for _, u := range im.ScramUserNames() {
			resp.Results = append(resp.Results, describe(u))
		}
		return now(resp), nil
	}
	seen := map[string]int{}
	for _, u := range r.Users {
		seen[u.Name]++
	}
	done := map[string]bool{}
	for _, u := range r.Users {
		if done[u.Name] {
			continue
		}
		done[u.Name] = true
		if seen[u.Name] > 1 {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = u.Name, kerr.DuplicateResource.Code
			res.ErrorMessage = errMsg(&codedError{kerr.DuplicateResource, "cannot describe the same user twice in one request"})
			resp.Results = append(resp.Results, res)
			continue
		}
		resp.Results = append(resp.Results, describe(u.Name))
	}
	return now(resp), nil
}
