package worker

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frame is a request as kgo writes it: size, header v2 (flexible), body.
func frame(req kmsg.Request, clientID string) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, 7)
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	b = append(b, 0) // header tags
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func TestMemberIDFromHeartbeat(t *testing.T) {
	m := &memberID{group: "shippers"}
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version = 1
	hb.GroupID, hb.MemberID, hb.MemberEpoch = "shippers", "m-123", 0
	hb.SubscribedTopicNames = []string{"shipment-jobs"}

	other := *hb
	other.GroupID = "another"
	m.inspect(frame(&other, "kgo"))
	if got := m.get(); got != "" {
		t.Fatalf("learned %q from another group's heartbeat", got)
	}
	fetch := kmsg.NewPtrShareFetchRequest()
	fetch.Version = 1
	fetch.GroupID, fetch.MemberID = kmsg.StringPtr("shippers"), kmsg.StringPtr("nope")
	m.inspect(frame(fetch, "kgo"))
	if got := m.get(); got != "" {
		t.Fatalf("learned %q from a ShareFetch", got)
	}
	m.inspect(frame(hb, "kgo"))
	if got := m.get(); got != "m-123" {
		t.Fatalf("member %q, want m-123", got)
	}
	// Truncated frames are ignored, never a panic.
	b := frame(hb, "a-longer-client-id")
	for i := range b {
		(&memberID{group: "shippers"}).inspect(b[:i])
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad address")
	err := fmt.Errorf("booking job 7: %w", Permanent(base))
	if !IsPermanent(err) || !errors.Is(err, base) {
		t.Fatalf("IsPermanent %v, Is %v", IsPermanent(err), errors.Is(err, base))
	}
	if IsPermanent(base) || Permanent(nil) != nil {
		t.Fatal("plain errors are not permanent; Permanent(nil) is nil")
	}
	if err.Error() != "booking job 7: bad address" {
		t.Fatalf("text %q", err)
	}
}

// New takes kgo's TLS option although it dials itself (the probe reads
// the dialer kgo builds from it), and share-only options.
func TestNewAcceptsTLSAndShareOptions(t *testing.T) {
	h := func(context.Context, *kgo.Record) error { return nil }
	w, err := New(h, Options{Group: "g", Topics: []string{"t"}},
		kgo.SeedBrokers("127.0.0.1:1"), kgo.DialTLSConfig(&tls.Config{}), kgo.ShareMaxRecords(3))
	if err != nil {
		t.Fatal(err)
	}
	w.Client().Close()
	if _, err := New(h, Options{Topics: []string{"t"}}); err == nil {
		t.Fatal("no group accepted")
	}
}

// The kgo client's warnings reach the worker's logger unless the options
// give a logger of their own.
func TestWorkerLogsClientWarnings(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := New(func(context.Context, *kgo.Record) error { return nil }, Options{Group: "g", Topics: []string{"t"}, Logger: log},
		kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Client().Close()
	if l, _ := w.Client().OptValue(kgo.WithLogger).(kgoLogger); l.l != log || l.Level() != kgo.LogLevelWarn {
		t.Fatalf("the client's logger is %T, want the worker's at warn", w.Client().OptValue(kgo.WithLogger))
	}
	// What it logs (on a buffer of its own: the client above may be
	// logging its failed dials).
	var buf bytes.Buffer
	kgoLogger{slog.New(slog.NewTextHandler(&buf, nil))}.Log(kgo.LogLevelWarn, "records discarded", "partition", 3)
	if got := buf.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, `msg="kgo: records discarded"`) || !strings.Contains(got, "partition=3") {
		t.Fatalf("logged %q", got)
	}
	own := kgo.BasicLogger(io.Discard, kgo.LogLevelDebug, nil)
	w2, err := New(func(context.Context, *kgo.Record) error { return nil }, Options{Group: "g", Topics: []string{"t"}, Logger: log},
		kgo.SeedBrokers("127.0.0.1:1"), kgo.WithLogger(own))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Client().Close()
	if l, _ := w2.Client().OptValue(kgo.WithLogger).(kgo.Logger); l != own {
		t.Fatalf("the options' logger was replaced by %T", l)
	}
}
