package metadata

import (
	"fmt"
	"maps"
	"slices"
)

// SCRAM credentials (AlterUserScramCredentials, KIP-554): per user and
// mechanism the salt, iteration count, StoredKey and ServerKey of RFC
// 5802. The password, and the salted password it was computed from,
// never reach the log.

// SCRAM mechanism names a credential may have.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// UserScramCredential sets (or, with Delete, removes) one user's SCRAM
// credential for one mechanism.
type UserScramCredential struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Delete     bool   `json:"delete,omitempty"`
	Salt       []byte `json:"salt,omitempty"`
	Iterations int32  `json:"iterations,omitempty"`
	StoredKey  []byte `json:"storedKey,omitempty"`
	ServerKey  []byte `json:"serverKey,omitempty"`
}

// ScramCredential is a stored credential. Immutable, like the Image.
type ScramCredential struct {
	Salt       []byte
	Iterations int32
	StoredKey  []byte
	ServerKey  []byte
}

// ScramCredential returns a user's credential for a mechanism.
func (im *Image) ScramCredential(user, mechanism string) (ScramCredential, bool) {
	c, ok := im.ScramUsers[user][mechanism]
	return c, ok
}

// ScramUserNames lists the users with a SCRAM credential, sorted.
func (im *Image) ScramUserNames() []string { return slices.Sorted(maps.Keys(im.ScramUsers)) }

func validScramMechanism(m string) bool { return m == ScramSHA256 || m == ScramSHA512 }

func (b *builder) userScramCredential(r *UserScramCredential) error {
	if r.User == "" || !validScramMechanism(r.Mechanism) {
		return fmt.Errorf("%w: SCRAM credential needs a user and a mechanism (%s or %s), got %q %q",
			ErrInvalidRecord, ScramSHA256, ScramSHA512, r.User, r.Mechanism)
	}
	old := b.im.ScramUsers[r.User]
	if r.Delete {
		if _, ok := old[r.Mechanism]; !ok {
			return fmt.Errorf("%w: no %s credential for user %q", ErrInvalidRecord, r.Mechanism, r.User)
		}
	} else if len(r.Salt) == 0 || r.Iterations <= 0 || len(r.StoredKey) == 0 || len(r.ServerKey) == 0 {
		return fmt.Errorf("%w: SCRAM credential of %q without salt, iterations or keys", ErrInvalidRecord, r.User)
	}
	users := maps.Clone(b.im.ScramUsers) // small; one clone per record keeps older images intact
	if users == nil {
		users = map[string]map[string]ScramCredential{}
	}
	mechs := maps.Clone(old)
	if mechs == nil {
		mechs = map[string]ScramCredential{}
	}
	if r.Delete {
		delete(mechs, r.Mechanism)
	} else {
		mechs[r.Mechanism] = ScramCredential{Salt: r.Salt, Iterations: r.Iterations, StoredKey: r.StoredKey, ServerKey: r.ServerKey}
	}
	if len(mechs) == 0 {
		delete(users, r.User)
	} else {
		users[r.User] = mechs
	}
	b.im.ScramUsers = users
	return nil
}

// scramJSON is one credential in a snapshot.
type scramJSON struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt"`
	Iterations int32  `json:"iterations"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
}

func encodeScram(im *Image) []scramJSON {
	var out []scramJSON
	for _, u := range im.ScramUserNames() {
		for _, m := range slices.Sorted(maps.Keys(im.ScramUsers[u])) {
			c := im.ScramUsers[u][m]
			out = append(out, scramJSON{u, m, c.Salt, c.Iterations, c.StoredKey, c.ServerKey})
		}
	}
	return out
}

func decodeScram(js []scramJSON, im *Image) error {
	for _, j := range js {
		if _, dup := im.ScramUsers[j.User][j.Mechanism]; dup || j.User == "" || !validScramMechanism(j.Mechanism) ||
			len(j.Salt) == 0 || j.Iterations <= 0 || len(j.StoredKey) == 0 || len(j.ServerKey) == 0 {
			return fmt.Errorf("%w: image: SCRAM credential %q %q twice or incomplete", ErrCorrupt, j.User, j.Mechanism)
		}
		if im.ScramUsers == nil {
			im.ScramUsers = map[string]map[string]ScramCredential{}
		}
		if im.ScramUsers[j.User] == nil {
			im.ScramUsers[j.User] = map[string]ScramCredential{}
		}
		im.ScramUsers[j.User][j.Mechanism] = ScramCredential{j.Salt, j.Iterations, j.StoredKey, j.ServerKey}
	}
	return nil
}
