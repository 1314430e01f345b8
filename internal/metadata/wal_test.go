package metadata

import (
	"bytes"
	"errors"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func testWAL(t testing.TB, n int) []byte {
	t.Helper()
	b := walHeader()
	var err error
	for i := 1; i <= n; i++ {
		e := &pb.Entry{Index: new(uint64(i)), Term: new(uint64(1)), Type: pb.EntryNormal.Enum(), Data: []byte(`{"v":1}`)}
		if b, err = appendFrame(b, frameEntry, e); err != nil {
			t.Fatal(err)
		}
		hs := &pb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(uint64(i))}
		if b, err = appendFrame(b, frameHardState, hs); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func TestReadWAL(t *testing.T) {
	b := testWAL(t, 5)
	recs, valid, err := readWAL(b)
	if err != nil || valid != int64(len(b)) || len(recs) != 10 {
		t.Fatalf("intact WAL: %d records, valid %d of %d, %v", len(recs), valid, len(b), err)
	}
	if got := recs[8].entry.GetIndex(); got != 5 {
		t.Fatalf("record 8 is entry %d, want 5", got)
	}
	if got := recs[9].hs.GetCommit(); got != 5 {
		t.Fatalf("record 9 commits %d, want 5", got)
	}
	// Every cut inside the last frame loses exactly that frame.
	_, lastStart, _ := readWAL(b[:len(b)-1])
	for cut := lastStart; cut < int64(len(b)); cut++ {
		recs, valid, err := readWAL(b[:cut])
		var cerr *CorruptionError
		if cut > lastStart && !errors.As(err, &cerr) {
			t.Fatalf("cut at %d: err %v, want *CorruptionError", cut, err)
		}
		if valid != lastStart || len(recs) != 9 {
			t.Fatalf("cut at %d: valid %d (want %d), %d records", cut, valid, lastStart, len(recs))
		}
	}
	// A flipped bit anywhere in a frame stops the prefix before it.
	for i := walHeaderLen; i < len(b); i++ {
		d := bytes.Clone(b)
		d[i] ^= 1
		_, valid, err := readWAL(d)
		if err == nil || valid > int64(i) {
			t.Fatalf("bit flip at %d: valid %d, err %v", i, valid, err)
		}
	}
	if _, _, err := readWAL([]byte("NOTAWAL!\x01\x00\x00\x00")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad magic: %v", err)
	}
}

// FuzzWALRecover feeds arbitrary bytes to the WAL reader, with and without
// a valid header. It must never panic, and its valid prefix must read back
// cleanly with the same records.
func FuzzWALRecover(f *testing.F) {
	w := testWAL(f, 3)
	f.Add(w)
	f.Add(w[:len(w)-5])
	f.Add(w[walHeaderLen:])
	f.Add(append(bytes.Clone(w), 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range [][]byte{data, append(walHeader(), data...)} {
			recs, valid, err := readWAL(b)
			if valid < 0 || valid > int64(len(b)) {
				t.Fatalf("valid %d out of [0, %d]", valid, len(b))
			}
			if err == nil && valid != int64(len(b)) {
				t.Fatalf("no error but valid %d < %d", valid, len(b))
			}
			if valid == 0 {
				continue
			}
			again, valid2, err := readWAL(b[:valid])
			if err != nil || valid2 != valid || len(again) != len(recs) {
				t.Fatalf("prefix re-read: %d records, valid %d, %v; first read %d records, valid %d",
					len(again), valid2, err, len(recs), valid)
			}
			for i := range recs {
				if !proto.Equal(recMsg(recs[i]), recMsg(again[i])) {
					t.Fatalf("record %d differs on re-read", i)
				}
			}
		}
	})
}

func recMsg(r walRecord) proto.Message {
	if r.entry != nil {
		return r.entry
	}
	return r.hs
}
