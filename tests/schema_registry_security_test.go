package tests

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/berthmq/berth/internal/audit"
	"github.com/berthmq/berth/internal/poll"
	tc "github.com/berthmq/berth/internal/testcluster"
)

// subjectACL creates an ALLOW binding on Berth's SUBJECT resource (type
// 100) with a raw CreateAcls request, as `berth acl create --subject` does.
func subjectACL(t *testing.T, cl *kgo.Client, principal, subject string, pattern kmsg.ACLResourcePatternType, ops ...kmsg.ACLOperation) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, op := range ops {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = 100, subject, pattern
		c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("create subject ACL: code %d %v", r.ErrorCode, strDeref(r.ErrorMessage))
		}
	}
}

// The registry on a secured node: HTTP Basic against the SCRAM users and
// the PLAIN admin, the authorizer on, subjects authorized per ACL on
// Berth's SUBJECT resource: a user reads and registers only the subjects
// its ACLs name, lists only those, reads a schema by id only through one
// of them, and may not change the global level.
func TestSchemaRegistryAuth(t *testing.T) {
	n := startSASL(t, "PLAIN,SCRAM-SHA-512",
		tc.With("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
		tc.With("super.users", "User:admin"),
		tc.With("http.auth", "basic"))
	createScramUsers(t, n.Addr(), kadm.UpsertSCRAM{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"})
	ctx := ctxT(t, 60*time.Second)
	url := "http://" + n.HTTPAddr()
	client := func(opts ...sr.ClientOpt) *sr.Client {
		cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(url)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	admin := client(sr.BasicAuth("admin", "admin-secret"))
	alice := client(sr.BasicAuth("alice", "alice-pw"))

	// No credentials, wrong ones: 401; metrics stay open.
	_, err := client().Subjects(ctx)
	wantSRError(t, err, 401, "")
	_, err = client(sr.BasicAuth("alice", "nope")).Subjects(ctx)
	wantSRError(t, err, 401, "")
	if resp, err := http.Get(url + "/metrics"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	pay, err := admin.CreateSchema(ctx, "payments-value", sr.Schema{Schema: `"string"`})
	if err != nil {
		t.Fatal(err)
	}
	// No ACL: refused.
	_, err = alice.CreateSchema(ctx, "orders-value", sr.Schema{Schema: seedOrdersV1})
	wantSRError(t, err, 40301, "")

	subjectACL(t, saslClient(t, n.Addr(), plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()), "User:alice", "orders-", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationRead, kmsg.ACLOperationWrite)
	var o sr.SubjectSchema
	regDeadline := time.Now().Add(10 * time.Second)
	for {
		if o, err = alice.CreateSchema(ctx, "orders-value", sr.Schema{Schema: seedOrdersV1}); err == nil || time.Now().After(regDeadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("alice registers orders-value with WRITE on orders-*: %v", err)
	}
	if _, err := alice.SchemaByVersion(ctx, "orders-value", -1); err != nil {
		t.Fatalf("alice reads orders-value: %v", err)
	}
	_, err = alice.CreateSchema(ctx, "payments-value", sr.Schema{Schema: `"bytes"`})
	wantSRError(t, err, 40301, "")
	_, err = alice.SchemaByVersion(ctx, "payments-value", -1)
	wantSRError(t, err, 40301, "")
	_, err = alice.SchemaByID(ctx, pay.ID)
	wantSRError(t, err, 40301, "")
	if _, err := alice.SchemaByID(ctx, o.ID); err != nil {
		t.Fatalf("alice reads her schema by id: %v", err)
	}
	// The subject authorized is the subject served: an escaped slash or
	// percent sign in a path does not move the check to another subject.
	adminKafka := saslClient(t, n.Addr(), plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())
	subjectACL(t, adminKafka, "User:alice", "ro", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead)
	subjectACL(t, adminKafka, "User:alice", "roA", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead, kmsg.ACLOperationWrite)
	raw := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("alice", "alice-pw")
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	poll.Until(t, 10*time.Second, func() error { // the ACLs reach the node
		if code, body := raw("GET", "/subjects/roA/versions", ""); code != 404 {
			return fmt.Errorf("alice reads roA: %d %s; want 404 (no such subject) once her ACL applies", code, body)
		}
		return nil
	})
	for _, path := range []string{"/subjects/ro%2Fz/versions", "/subjects/ro%2541/versions", "/subjects/ro%2F..%2FroA/versions"} {
		if code, body := raw("POST", path, `{"schema":"\"string\""}`); code != 403 {
			t.Errorf("POST %s with READ on ro and WRITE on roA: %d %s; want 403", path, code, body)
		}
	}
	if code, body := raw("POST", "/subjects/roA/versions", `{"schema":"\"string\""}`); code != 200 {
		t.Errorf("POST /subjects/roA/versions with WRITE on roA: %d %s", code, body)
	}
	if subs, err := admin.Subjects(ctx); err != nil || slices.ContainsFunc(subs, func(s string) bool { return strings.HasPrefix(s, "ro") && s != "roA" }) {
		t.Fatalf("subjects after the escaped writes: %v, %v", subs, err)
	}
	// A schema whose only subject is soft-deleted is still that subject's:
	// alice may not read it by id, nor learn the deleted subject's name.
	sec, err := admin.CreateSchema(ctx, "secret-value", sr.Schema{Schema: `{"type":"fixed","name":"k","size":16}`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.DeleteSubject(ctx, "secret-value", sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/schemas/ids/%d", "/schemas/ids/%d/schema", "/schemas/ids/%d/subjects?deleted=true", "/schemas/ids/%d/versions?deleted=true"} {
		p := fmt.Sprintf(path, sec.ID)
		if code, body := raw("GET", p, ""); code != 403 || strings.Contains(body, "secret") {
			t.Errorf("GET %s of a soft-deleted subject alice may not read: %d %s; want 403", p, code, body)
		}
	}
	if subs, err := alice.Subjects(ctx); err != nil || !slices.Equal(subs, []string{"orders-value", "roA"}) {
		t.Fatalf("alice lists %v, %v; want only orders-value and roA", subs, err)
	}
	if subs, err := admin.Subjects(ctx); err != nil || len(subs) != 3 {
		t.Fatalf("admin lists %v, %v; want orders-value, payments-value, roA", subs, err)
	}
	res := alice.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone})
	if len(res) != 1 {
		t.Fatalf("set global level: %+v", res)
	}
	wantSRError(t, res[0].Err, 40301, "")
	_, err = alice.DeleteSubject(ctx, "orders-value", sr.SoftDelete)
	wantSRError(t, err, 40301, "") // READ and WRITE, not DELETE

	// A password changed takes effect at once (the node caches Basic
	// credentials that passed, keyed by the user's current SCRAM keys).
	createScramUsers(t, n.Addr(), kadm.UpsertSCRAM{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw2"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = alice.Subjects(ctx)
		var re *sr.ResponseError
		if errors.As(err, &re) && re.ErrorCode == 401 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantSRError(t, err, 401, "")
	if _, err := client(sr.BasicAuth("alice", "alice-pw2")).Subjects(ctx); err != nil {
		t.Fatalf("alice's new password: %v", err)
	}

	// Produce and consume with SASL go on as before: the registry's
	// principals are the Kafka ones.
	if _, err := kadm.NewClient(saslClient(t, n.Addr(), plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())).ListTopics(ctx); err != nil {
		t.Fatal(err)
	}
}

// http.auth=bearer checks tokens as the OAUTHBEARER listener does (here
// its development mode: unsecured tokens, no JWKS); the token's subject
// is the principal the ACLs authorize.
func TestSchemaRegistryBearer(t *testing.T) {
	n := startSASL(t, "PLAIN,OAUTHBEARER",
		tc.With("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
		tc.With("super.users", "User:admin"),
		tc.With("http.auth", "basic,bearer"))
	ctx := ctxT(t, 30*time.Second)
	bearer := func(tok string) *sr.Client {
		cl, err := sr.NewClient(sr.URLs("http://"+n.HTTPAddr()), sr.BearerToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	dev := bearer(unsecuredToken(t, jwt.MapClaims{"sub": "dev", "exp": time.Now().Add(time.Hour).Unix()}))
	_, err := dev.CreateSchema(ctx, "dev-value", sr.Schema{Schema: `"string"`})
	wantSRError(t, err, 40301, "") // authenticated as User:dev, no ACL yet
	subjectACL(t, saslClient(t, n.Addr(), plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()),
		"User:dev", "dev-value", kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationWrite, kmsg.ACLOperationRead)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err = dev.CreateSchema(ctx, "dev-value", sr.Schema{Schema: `"string"`}); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("User:dev registers with WRITE and READ (the client reads the schema back by id): %v", err)
	}
	expired := bearer(unsecuredToken(t, jwt.MapClaims{"sub": "dev", "exp": time.Now().Add(-time.Hour).Unix()}))
	_, err = expired.Subjects(ctx)
	wantSRError(t, err, 401, "")
	_, err = bearer("not-a-jwt").Subjects(ctx)
	wantSRError(t, err, 401, "")
}

// Registrations, deletions and level changes reach the audit trail as
// management events (schema-registry.<method>), with the principal.
func TestSchemaRegistryAudit(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	n := tc.Start(t, tc.With("audit.log.enable", "true"), tc.With("audit.log.file", file), tc.With("audit.log.events", "management"))
	ctx := ctxT(t, 30*time.Second)
	reg := srClient(t, n.HTTPAddr())
	if _, err := reg.CreateSchema(ctx, "orders-value", sr.Schema{Schema: seedOrdersV1}); err != nil {
		t.Fatal(err)
	}
	if res := reg.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFull}, "orders-value"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if _, err := reg.DeleteSubject(ctx, "orders-value", sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	want := []string{"schema-registry.RegisterSchema", "schema-registry.UpdateCompatibility", "schema-registry.DeleteSubject"}
	poll.Until(t, 20*time.Second, func() error {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		for _, m := range want {
			found := false
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				ce, err := audit.Decode([]byte(l))
				if err != nil {
					return err
				}
				if ce.Data.MethodName == m && ce.Data.AuthorizationInfo != nil && ce.Data.AuthorizationInfo.ResourceName == "orders-value" &&
					ce.Data.AuthorizationInfo.ResourceType == "Subject" && ce.Data.AuthenticationInfo.Principal == "User:ANONYMOUS" {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("no %s event in:\n%s", m, b)
			}
		}
		return nil
	})
}
