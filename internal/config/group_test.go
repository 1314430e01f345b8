package config

import "testing"

// A group config without a value of the group's own resolves to its
// broker setting.
func TestResolveGroup(t *testing.T) {
	c := Defaults()
	if err := c.Set("group.share.retry.backoff.initial.ms", "100", SourceFlag); err != nil {
		t.Fatal(err)
	}
	if v, src := c.ResolveGroup("share.retry.backoff.initial.ms", nil, nil); v != "100" || src != FromStaticBroker {
		t.Fatalf("initial backoff resolves to %q from %d", v, src)
	}
}
