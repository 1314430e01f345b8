package metadata

import (
	"bytes"
	"errors"
	"testing"
)

func scramRec(user, mech string, del bool) Record {
	r := &UserScramCredential{User: user, Mechanism: mech, Delete: del}
	if !del {
		r.Salt, r.Iterations, r.StoredKey, r.ServerKey = []byte("salt"), 4096, []byte("stored"), []byte("server")
	}
	return Record{UserScramCredential: r}
}

func TestScramCredentialApply(t *testing.T) {
	im0 := emptyImage()
	im1, _, err := Apply(im0, 1, []Record{scramRec("alice", ScramSHA256, false), scramRec("alice", ScramSHA512, false), scramRec("bob", ScramSHA512, false)})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := im1.ScramCredential("alice", ScramSHA512); !ok || c.Iterations != 4096 || string(c.StoredKey) != "stored" {
		t.Fatalf("alice: %+v %v", c, ok)
	}
	im2, _, err := Apply(im1, 2, []Record{scramRec("alice", ScramSHA256, true), scramRec("bob", ScramSHA512, true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := im2.ScramCredential("alice", ScramSHA256); ok {
		t.Fatal("deleted credential still there")
	}
	if names := im2.ScramUserNames(); len(names) != 1 || names[0] != "alice" {
		t.Fatalf("users %v: bob has no credential left", names)
	}
	if _, ok := im1.ScramCredential("bob", ScramSHA512); !ok {
		t.Fatal("applying changed the previous image")
	}
	for name, r := range map[string]Record{
		"delete missing": scramRec("carol", ScramSHA256, true),
		"bad mechanism":  scramRec("carol", "SCRAM-SHA-1", false),
		"no user":        scramRec("", ScramSHA256, false),
		"no keys":        {UserScramCredential: &UserScramCredential{User: "carol", Mechanism: ScramSHA256, Iterations: 4096}},
	} {
		if _, _, err := Apply(im2, 3, []Record{r}); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: %v, want ErrInvalidRecord", name, err)
		}
	}
}

// SCRAM credentials survive a snapshot round trip and a restart of the
// controller (WAL replay and snapshot).
func TestScramCredentialSnapshotAndRestart(t *testing.T) {
	im, _, err := Apply(emptyImage(), 1, []Record{scramRec("alice", ScramSHA512, false), scramRec("a,b", ScramSHA256, false)})
	if err != nil {
		t.Fatal(err)
	}
	enc := EncodeImage(im)
	back, err := DecodeImage(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(EncodeImage(back), enc) {
		t.Fatalf("round trip differs:\n%s\n%s", EncodeImage(back), enc)
	}
	if _, ok := back.ScramCredential("a,b", ScramSHA256); !ok {
		t.Fatal("credential lost in the snapshot")
	}

	dir := t.TempDir()
	c := open(t, testConfig(dir))
	if err := c.Propose(ctx(t), scramRec("alice", ScramSHA512, false)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, c)
	c2 := open(t, testConfig(dir))
	defer mustClose(t, c2)
	if cred, ok := c2.Image().ScramCredential("alice", ScramSHA512); !ok || string(cred.ServerKey) != "server" {
		t.Fatalf("after restart: %+v %v", cred, ok)
	}
}
