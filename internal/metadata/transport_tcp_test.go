package metadata

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/berthmq/berth/internal/poll"
)

// fakeReceiver records what a transport delivers.
type fakeReceiver struct {
	mu          sync.Mutex
	msgs        []*pb.Message
	unreachable []uint64
	snaps       []raft.SnapshotStatus
	joins       []JoinRequest
}

func (f *fakeReceiver) Step(_ context.Context, m *pb.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, m)
	return nil
}

func (f *fakeReceiver) ReportUnreachable(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unreachable = append(f.unreachable, id)
}

func (f *fakeReceiver) ReportSnapshot(_ uint64, st raft.SnapshotStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snaps = append(f.snaps, st)
}

func (f *fakeReceiver) Join(req JoinRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.joins = append(f.joins, req)
}

func (f *fakeReceiver) snapshot() fakeReceiver {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fakeReceiver{msgs: slices.Clone(f.msgs), unreachable: slices.Clone(f.unreachable),
		snaps: slices.Clone(f.snaps), joins: slices.Clone(f.joins)}
}

func newTestTransport(t *testing.T, id uint64, cluster string) (*TCPTransport, *fakeReceiver) {
	t.Helper()
	tr, err := NewTCPTransport(TCPConfig{NodeID: id, Addr: "127.0.0.1:0", ClusterID: cluster,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	r := &fakeReceiver{}
	tr.Start(r)
	return tr, r
}

func TestTCPTransportDelivers(t *testing.T) {
	a, ra := newTestTransport(t, 1, "c1")
	b, rb := newTestTransport(t, 2, "")
	a.SetPeers(map[uint64]string{1: a.Addr().String(), 2: b.Addr().String()})

	data := make([]byte, 3<<20) // larger than one buffered write
	for i := range data {
		data[i] = byte(i)
	}
	a.Send([]*pb.Message{
		{Type: pb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(3))},
		{Type: pb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(3)),
			Snapshot: &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: new(uint64(9)), Term: new(uint64(3))}}},
	})
	a.SendJoin(2, JoinRequest{ID: 1, Addr: "h:1"})
	poll.Until(t, 5*time.Second, func() error {
		got := rb.snapshot()
		if len(got.msgs) != 2 || len(got.joins) != 1 {
			return fmt.Errorf("received %d messages, %d joins", len(got.msgs), len(got.joins))
		}
		if got.msgs[0].GetType() != pb.MsgHeartbeat || got.msgs[1].GetSnapshot().GetMetadata().GetIndex() != 9 ||
			len(got.msgs[1].GetSnapshot().GetData()) != len(data) || got.msgs[1].GetSnapshot().GetData()[12345] != data[12345] {
			return fmt.Errorf("messages arrived damaged: %v", got.msgs[0])
		}
		if got.joins[0] != (JoinRequest{ID: 1, Addr: "h:1"}) {
			return fmt.Errorf("join %+v", got.joins[0])
		}
		if s := ra.snapshot().snaps; len(s) != 1 || s[0] != raft.SnapshotFinish {
			return fmt.Errorf("snapshot reports %v, want one SnapshotFinish", s)
		}
		return nil
	})

	// A cut link drops silently, reports a MsgSnap failed, and heals.
	a.SetDropFilter(func(to uint64) bool { return to == 2 })
	a.Send([]*pb.Message{{Type: pb.MsgSnap.Enum(), To: new(uint64(2)), Snapshot: &pb.Snapshot{}}})
	if s := ra.snapshot().snaps; len(s) != 2 || s[1] != raft.SnapshotFailure {
		t.Fatalf("snapshot reports %v after a cut link, want a failure", s)
	}
	a.SetDropFilter(nil)
	a.Send([]*pb.Message{{Type: pb.MsgApp.Enum(), To: new(uint64(2))}})
	poll.Until(t, 5*time.Second, func() error {
		if n := len(rb.snapshot().msgs); n != 3 {
			return fmt.Errorf("%d messages after healing, want 3", n)
		}
		return nil
	})
}

func TestTCPTransportRefusesWrongPeer(t *testing.T) {
	a, ra := newTestTransport(t, 1, "c1")
	b, rb := newTestTransport(t, 2, "c1")
	c, rc := newTestTransport(t, 3, "c2")
	// a believes node 3 lives at b's address: b refuses (wrong node), and
	// c refuses a's cluster id.
	a.SetPeers(map[uint64]string{3: b.Addr().String(), 4: c.Addr().String()})
	poll.Until(t, 5*time.Second, func() error {
		a.Send([]*pb.Message{{Type: pb.MsgHeartbeat.Enum(), To: new(uint64(3))}, {Type: pb.MsgHeartbeat.Enum(), To: new(uint64(4))}})
		u := ra.snapshot().unreachable
		if !slices.Contains(u, 3) || !slices.Contains(u, 4) {
			return fmt.Errorf("unreachable reports %v, want 3 and 4", u)
		}
		return nil
	})
	if n := len(rb.snapshot().msgs) + len(rc.snapshot().msgs); n != 0 {
		t.Fatalf("%d messages delivered to the wrong node or cluster", n)
	}
	// Unknown peer: reported at once.
	a.Send([]*pb.Message{{Type: pb.MsgHeartbeat.Enum(), To: new(uint64(9))}})
	if !slices.Contains(ra.snapshot().unreachable, 9) {
		t.Fatal("a message to an unknown peer was not reported unreachable")
	}
}

func TestTCPFrameJoinCodec(t *testing.T) {
	b, err := appendTCPFrame(nil, outItem{join: &JoinRequest{ID: 42, Addr: "host:9093"}})
	if err != nil {
		t.Fatal(err)
	}
	req, ok := decodeJoin(b[5:])
	if !ok || req.ID != 42 || req.Addr != "host:9093" {
		t.Fatalf("join round trip: %+v %v", req, ok)
	}
	if _, ok := decodeJoin(b[5 : len(b)-1]); ok {
		t.Fatal("truncated join decoded")
	}
}

// FuzzTCPInput feeds arbitrary bytes to the receiving side's decoders: the
// handshake, frames, join requests and Raft messages never panic, and the
// frame reader never allocates beyond MaxFrameBytes.
func FuzzTCPInput(f *testing.F) {
	hs := handshake{From: 1, To: 2, ClusterID: "c", Addr: "h:1"}.encode()
	frame, _ := appendTCPFrame(nil, outItem{m: &pb.Message{Type: pb.MsgApp.Enum(), To: new(uint64(2)),
		Entries: []*pb.Entry{{Data: []byte(`{"v":1,"node":1,"id":2,"records":[]}`)}}}})
	join, _ := appendTCPFrame(nil, outItem{join: &JoinRequest{ID: 3, Addr: "h:2"}})
	f.Add(append(append(slices.Clone(hs), frame...), join...))
	f.Add(hs)
	f.Add([]byte("BERTHRFT\x01\x00"))
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReader(bytes.NewReader(b))
		if _, err := readHandshake(br); err != nil {
			br = bufio.NewReader(bytes.NewReader(b))
		}
		var buf []byte
		for {
			kind, payload, err := readTCPFrame(br, buf)
			if err != nil {
				return
			}
			buf = payload
			switch kind {
			case frameRaft:
				m := &pb.Message{}
				if proto.Unmarshal(payload, m) == nil {
					for _, e := range m.GetEntries() {
						entryOrigin(e)
					}
				}
			case frameJoin:
				decodeJoin(payload)
			}
			envelopeOrigin(payload)
			parseConfContext(payload)
		}
	})
}
