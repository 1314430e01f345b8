package handler

// AlterUserScramCredentials, version 0: upsert and delete SCRAM
// credentials (KIP-554). An upsertion carries the salt and the salted
// password the client computed; the broker derives StoredKey and
// ServerKey and writes those to the metadata log (never the salted
// password). Kafka's checks, per user: an empty name or a salt, salted
// password or iteration count outside 4096..16384 is
// UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM,
// the same user and mechanism twice DUPLICATE_RESOURCE, deleting a
// credential that does not exist RESOURCE_NOT_FOUND. A user with any
// failed alteration has none applied.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/auth"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(51, 0, 0, (*Broker).alterUserScramCredentials) }

func (b *Broker) alterUserScramCredentials(ctx context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !b.authorizedCluster(req, kmsg.ACLOperationAlter) {
		// Kafka answers every user of the request with the refusal.
		seen := map[string]bool{}
		refuse := func(user string) {
			if seen[user] {
				return
			}
			seen[user] = true
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = user, kerr.ClusterAuthorizationFailed.Code
			res.ErrorMessage = kmsg.StringPtr("ALTER on the cluster is needed to change SCRAM users")
			resp.Results = append(resp.Results, res)
		}
		for _, d := range r.Deletions {
			refuse(d.Name)
		}
		for _, u := range r.Upsertions {
			refuse(u.Name)
		}
		return now(resp), nil
	}
	im := b.image()
	var users []string               // in request order
	errs := map[string]*codedError{} // the first error per user
	recs := map[string][]metadata.Record{}
	seen := map[[2]string]bool{} // user, mechanism
	failUser := func(user string, ke *kerr.Error, format string, args ...any) {
		if errs[user] == nil {
			errs[user] = &codedError{ke: ke, msg: fmt.Sprintf(format, args...)}
		}
	}
	note := func(user string) {
		if _, ok := recs[user]; !ok {
			users = append(users, user)
			recs[user] = nil
		}
	}
	check := func(user string, code int8) (string, bool) {
		note(user)
		mech, ok := scramMechanisms[code]
		switch {
		case user == "":
			failUser(user, kerr.UnacceptableCredential, "username must not be empty")
			return "", false
		case !ok:
			failUser(user, kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism %d", code)
			return "", false
		case seen[[2]string{user, mech}]:
			failUser(user, kerr.DuplicateResource, "a user credential cannot be altered twice in the same request (%s, %s)", user, mech)
			return "", false
		}
		seen[[2]string{user, mech}] = true
		return mech, true
	}
	for _, d := range r.Deletions {
		mech, ok := check(d.Name, d.Mechanism)
		if !ok {
			continue
		}
		if _, exists := im.ScramCredential(d.Name, mech); !exists {
			failUser(d.Name, kerr.ResourceNotFound, "attempt to delete a user credential that does not exist (%s, %s)", d.Name, mech)
			continue
		}
		recs[d.Name] = append(recs[d.Name], metadata.Record{UserScramCredential: &metadata.UserScramCredential{User: d.Name, Mechanism: mech, Delete: true}})
	}
	for _, u := range r.Upsertions {
		mech, ok := check(u.Name, u.Mechanism)
		if !ok {
			continue
		}
		h := auth.ScramHash(mech)
		switch {
		case u.Iterations < auth.ScramMinIterations:
			failUser(u.Name, kerr.UnacceptableCredential, "too few iterations: %d (at least %d)", u.Iterations, auth.ScramMinIterations)
			continue
		case u.Iterations > auth.ScramMaxIterations:
			failUser(u.Name, kerr.UnacceptableCredential, "too many iterations: %d (at most %d)", u.Iterations, auth.ScramMaxIterations)
			continue
		case len(u.Salt) == 0:
			failUser(u.Name, kerr.UnacceptableCredential, "credential must have a salt")
			continue
		case len(u.SaltedPassword) != h().Size():
			failUser(u.Name, kerr.UnacceptableCredential, "salted password must be %d bytes for %s", h().Size(), mech)
			continue
		}
		stored, server := auth.ScramKeys(mech, u.SaltedPassword)
		recs[u.Name] = append(recs[u.Name], metadata.Record{UserScramCredential: &metadata.UserScramCredential{
			User: u.Name, Mechanism: mech, Salt: u.Salt, Iterations: u.Iterations, StoredKey: stored, ServerKey: server,
		}})
	}
	var batch []metadata.Record
	for _, u := range users {
		if errs[u] == nil {
			batch = append(batch, recs[u]...)
		}
	}
	var proposeErr error
	if len(batch) > 0 {
		proposeErr = b.propose(ctx, batch...)
	}
	for _, u := range users {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = u
		switch {
		case errs[u] != nil:
			res.ErrorCode, res.ErrorMessage = errs[u].ke.Code, errMsg(errs[u])
		case proposeErr != nil:
			res.ErrorCode, res.ErrorMessage = code(proposeErr), errMsg(proposeErr)
		}
		if res.ErrorCode == 0 && req.Conn != nil {
			b.Auditor.Audit(auth.Event{
				Time: time.Now(), Principal: req.Conn.Principal(), Host: req.Conn.Remote, Listener: req.Conn.Listener,
				Kind: "management", Method: "AlterUserScramCredentials", Operation: "ALTER",
				ResourceType: "USER", ResourceName: u, Allowed: true,
			})
		}
		resp.Results = append(resp.Results, res)
	}
	return now(resp), nil
}
