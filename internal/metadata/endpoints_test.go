package metadata

import (
	"errors"
	"slices"
	"testing"
)

// A broker's endpoints survive apply and a snapshot round trip; a
// registration from before endpoints existed (no "endpoints" member)
// still decodes, and its Host/Port answer every listener name.
func TestBrokerEndpoints(t *testing.T) {
	eps := []Endpoint{
		{Name: "PLAINTEXT", Host: "10.0.0.1", Port: 9092, Protocol: "PLAINTEXT"},
		{Name: "SSL", Host: "kafka-1.example", Port: 9093, Protocol: "SSL"},
	}
	im, _, err := Apply(emptyImage(), 1, []Record{
		{RegisterBroker: &RegisterBroker{ID: 1, Host: "10.0.0.1", Port: 9092, Endpoints: eps}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := im.Broker(1)
	if e, ok := b.Endpoint("SSL"); !ok || e.Host != "kafka-1.example" || e.Port != 9093 {
		t.Fatalf("SSL endpoint: %+v %v", e, ok)
	}
	if _, ok := b.Endpoint("INTERNAL"); ok {
		t.Fatal("a listener the broker does not have was found")
	}
	back, err := DecodeImage(EncodeImage(im))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := back.Broker(1); !slices.Equal(got.Endpoints, eps) {
		t.Fatalf("endpoints after a snapshot: %+v", got.Endpoints)
	}

	// An entry written before endpoints: Host and Port serve every listener.
	old := []byte(`{"v":1,"node":1,"id":1,"records":[{"registerBroker":{"id":2,"host":"h","port":9092}}]}`)
	d, err := decodeEntry(old)
	if err != nil {
		t.Fatal(err)
	}
	im2, _, err := Apply(im, 2, d.Records)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := im2.Broker(2)
	if e, ok := b2.Endpoint("SSL"); !ok || e.Host != "h" || e.Port != 9092 || b2.Endpoints != nil {
		t.Fatalf("old registration: %+v %v", e, ok)
	}

	// Bad endpoints are refused deterministically.
	for _, bad := range [][]Endpoint{
		{{Name: "A", Host: "h", Port: 1}, {Name: "A", Host: "h", Port: 2}},
		{{Name: "", Host: "h", Port: 1}},
		{{Name: "A", Host: "", Port: 1}},
		{{Name: "A", Host: "h", Port: 70000}},
	} {
		_, _, err := Apply(im, 3, []Record{{RegisterBroker: &RegisterBroker{ID: 3, Host: "h", Port: 1, Endpoints: bad}}})
		if !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("endpoints %+v: %v", bad, err)
		}
	}
}

// A registration's endpoints survive a restart, from the WAL and from a
// snapshot.
func TestBrokerEndpointsRestart(t *testing.T) {
	eps := []Endpoint{{Name: "CLIENT", Host: "c", Port: 9092, Protocol: "SSL"}, {Name: "INTERNAL", Host: "i", Port: 9094, Protocol: "PLAINTEXT"}}
	for _, every := range []uint64{0, 1} { // 0: the default (WAL replay); 1: a snapshot after each entry
		dir := t.TempDir()
		cfg := testConfig(dir)
		cfg.SnapshotEvery = every
		c := open(t, cfg)
		if err := c.Propose(ctx(t), Record{RegisterBroker: &RegisterBroker{ID: 1, Host: "i", Port: 9094, Endpoints: eps}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Propose(ctx(t), createRec("t", 1)); err != nil {
			t.Fatal(err)
		}
		mustClose(t, c)
		c = open(t, cfg)
		b, ok := c.Image().Broker(1)
		if !ok || !slices.Equal(b.Endpoints, eps) {
			t.Fatalf("SnapshotEvery=%d: broker after a restart: %+v", every, b)
		}
		mustClose(t, c)
	}
}
