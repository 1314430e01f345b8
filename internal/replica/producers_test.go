package replica

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/berthmq/berth/internal/batch"
)

// TestProducerState runs testdata/producer_state through the idempotence
// state machine as Partition.Append drives it: check, then update for an
// accepted batch at the log end offset. Commands:
//
//	append pid=1 epoch=0 seq=0 count=3   a batch; prints accepted, duplicate or the error
//	truncate offset=N                      log truncated to N (the log end moves there)
//	expire cutoff=N                        producers last seen before N (ms) are dropped
//	now ms=N                               the clock update stamps LastSeen with
//	state                                  prints the state
//
// Every step also checks that the state survives the snapshot encoding.
// Regenerate with: go test ./internal/replica/ -run TestProducerState -rewrite
func TestProducerState(t *testing.T) {
	ps := newProducerState()
	var leo, now int64
	datadriven.RunTest(t, "testdata/producer_state", func(t *testing.T, d *datadriven.TestData) string {
		var b strings.Builder
		switch d.Cmd {
		case "append":
			var pid int64
			var epoch, seq, count int
			d.ScanArgs(t, "pid", &pid)
			d.ScanArgs(t, "epoch", &epoch)
			d.ScanArgs(t, "seq", &seq)
			d.ScanArgs(t, "count", &count)
			h := &batch.Header{
				ProducerID: pid, ProducerEpoch: int16(epoch), BaseSequence: int32(seq),
				LastOffsetDelta: int32(count - 1), RecordCount: int32(count), MaxTimestamp: now,
			}
			dup, err := ps.check(h)
			switch {
			case err != nil:
				fmt.Fprintf(&b, "error: %s\n", errName(err))
			case dup != nil:
				fmt.Fprintf(&b, "duplicate: offsets %d-%d\n", dup.FirstOffset, dup.LastOffset)
			default:
				ps.update(h, leo, now)
				fmt.Fprintf(&b, "accepted: offsets %d-%d\n", leo, leo+int64(count)-1)
				leo += int64(count)
			}
		case "truncate":
			d.ScanArgs(t, "offset", &leo)
			ps.truncate(leo)
		case "expire":
			var cutoff int64
			d.ScanArgs(t, "cutoff", &cutoff)
			ps.expire(cutoff)
		case "now":
			d.ScanArgs(t, "ms", &now)
		case "state":
		default:
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		state := dumpProducers(ps)
		data, err := ps.marshal()
		if err != nil {
			t.Fatal(err)
		}
		back := newProducerState()
		if err := back.unmarshal(data); err != nil {
			t.Fatal(err)
		}
		if again := dumpProducers(back); again != state {
			t.Fatalf("snapshot round trip changed the state:\n%s\n%s", state, again)
		}
		b.WriteString(state)
		return b.String()
	})
}

func errName(err error) string {
	switch {
	case errors.Is(err, ErrOutOfOrderSequence):
		return "OUT_OF_ORDER_SEQUENCE_NUMBER"
	case errors.Is(err, ErrInvalidEpoch):
		return "INVALID_PRODUCER_EPOCH"
	}
	return err.Error()
}

func dumpProducers(ps *producerState) string {
	if len(ps.m) == 0 {
		return "no producers\n"
	}
	var b strings.Builder
	ids := make([]int64, 0, len(ps.m))
	for id := range ps.m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		e := ps.m[id]
		fmt.Fprintf(&b, "pid %d epoch %d seen %d:", id, e.Epoch, e.LastSeen)
		for _, bm := range e.Batches {
			fmt.Fprintf(&b, " seq %d-%d@%d-%d", bm.FirstSeq, bm.LastSeq, bm.FirstOffset, bm.LastOffset)
		}
		b.WriteString("\n")
	}
	return b.String()
}
