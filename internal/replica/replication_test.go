package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	blog "github.com/berthmq/berth/internal/log"
	"github.com/berthmq/berth/internal/metadata"
)

// TestReplicationLeader runs testdata/replication through the leader's
// side of replication (replication.go) on broker 1: the high watermark
// over the ISR, ISR expansion and shrink proposals, acks waiting. Commands:
//
//	image leader=1 replicas=1,2,3 isr=1,2,3 [epoch=0]  apply a metadata image (partition epoch bumps)
//	append n=3                                          produce n records (staged until sync)
//	sync                                                write and fsync what is staged
//	fetch follower=2 offset=N                           a follower fetches at N
//	tick ms=N                                           the clock moves; the ISR check runs
//	commit                                              the controller commits the pending ISR proposal
//	fail                                                the controller refuses it (stale partition epoch)
//	refuse                                              the controller refuses it (ineligible replica, KIP-841)
//	late-fail                                           the refusal of the oldest unanswered proposal arrives
//	broker id=2 state=fenced|shutdown|live              the image shows broker 2 so (same partition state)
//	wait acks=all|1 offset=N                            would the last append, ending at N, be acknowledged now?
//
// Every command prints the partition's state afterwards.
// Regenerate with: go test ./internal/replica/ -run TestReplicationLeader -rewrite
func TestReplicationLeader(t *testing.T) {
	datadriven.Walk(t, "testdata/replication", func(t *testing.T, path string) {
		now := time.UnixMilli(1_000_000)
		var proposals []string
		m := NewManager(ManagerConfig{
			Dir: t.TempDir(), NodeID: 1, Fsync: true,
			Resolve: func(t *metadata.Topic) TopicConfig {
				cfgs := t.Configs
				min, _ := strconv.Atoi(cfgs["min.insync.replicas"])
				return TopicConfig{Log: blog.DefaultConfig(), MaxMessageBytes: 1 << 20, MinInsyncReplicas: max(min, 1),
					TimestampBeforeMs: -1, TimestampAfterMs: -1, CleanupPolicy: "delete"}
			},
			Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
			Now:           func() time.Time { return now },
			ReplicaLagMax: 10 * time.Second,
		})
		defer m.Close()
		type proposal struct {
			isr   []int32
			epoch int32
			seq   uint64     // the partition's number for it
			done  chan error // the controller's answer
		}
		proposed := make(chan *proposal, 1)
		m.cfg.AlterPartition = func(_ context.Context, _ string, _ int32, isr []int32, epoch int32) error {
			pr := &proposal{isr: isr, epoch: epoch, done: make(chan error, 1)}
			proposed <- pr
			return <-pr.done
		}
		// outstanding: proposals not answered yet, oldest first; the
		// last is the pending one, if any.
		var outstanding, answered []*proposal
		defer func() {
			for _, pr := range append(outstanding, answered...) {
				pr.done <- context.Canceled
			}
		}()
		id := [16]byte{7}
		var index uint64
		var lastGen uint64 // the staging generation of the last append
		var cur metadata.Partition
		configs := map[string]string{"min.insync.replicas": "2"}
		brokers := map[int32]metadata.Broker{1: {ID: 1}, 2: {ID: 2}, 3: {ID: 3}}
		apply := func(mp metadata.Partition) {
			index++
			cur = mp
			im := &metadata.Image{
				Index:    index,
				Brokers:  maps.Clone(brokers),
				Topics:   map[string]*metadata.Topic{"t": {Name: "t", ID: id, Configs: configs, Partitions: []metadata.Partition{mp}}},
				TopicIDs: map[[16]byte]string{id: "t"},
			}
			if err := m.Apply(im); err != nil {
				t.Fatal(err)
			}
		}
		ints := func(s string) []int32 {
			var out []int32
			for _, f := range strings.Split(s, ",") {
				if f == "" {
					continue
				}
				v, _ := strconv.Atoi(f)
				out = append(out, int32(v))
			}
			return out
		}
		hasPending := func() bool {
			p := m.Get("t", 0)
			if p == nil {
				return false
			}
			p.rmu.Lock()
			defer p.rmu.Unlock()
			return p.repl.pending != nil
		}
		// settle takes the proposal a command started, if it started one
		// (alterISR sets pending before it hands the proposal over).
		settle := func(hadPending bool) {
			if hadPending || !hasPending() {
				return
			}
			select {
			case pr := <-proposed:
				proposals = append(proposals, fmt.Sprintf("propose isr=%v partition-epoch=%d", pr.isr, pr.epoch))
				p := m.Get("t", 0)
				p.rmu.Lock()
				pr.seq = p.repl.alterSeq
				p.rmu.Unlock()
				outstanding = append(outstanding, pr)
			case <-time.After(5 * time.Second):
				t.Fatal("proposal never reached the controller")
			}
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var out strings.Builder
			arg := func(k string) string {
				for _, a := range d.CmdArgs {
					if a.Key == k && len(a.Vals) > 0 {
						return a.Vals[0]
					}
				}
				return ""
			}
			num := func(k string) int64 { v, _ := strconv.ParseInt(arg(k), 10, 64); return v }
			before := len(proposals)
			hadPending := hasPending()
			switch d.Cmd {
			case "image":
				mp := metadata.Partition{Leader: int32(num("leader")), LeaderEpoch: int32(num("epoch")),
					PartitionEpoch: cur.PartitionEpoch + 1, Replicas: ints(arg("replicas")), ISR: ints(arg("isr"))}
				if index == 0 {
					mp.PartitionEpoch = 0
				}
				apply(mp)
			case "append":
				p := m.Get("t", 0)
				res, err := p.Append(makeBatch(-1, 0, 0, int(num("n")), "r"), nil)
				lastGen = res.Gen
				if err != nil {
					fmt.Fprintf(&out, "error: %v\n", err)
				} else {
					fmt.Fprintf(&out, "appended offsets %d-%d\n", res.BaseOffset, res.Durable-1)
				}
			case "sync":
				m.flushAndSync()
			case "fetch":
				p := m.Get("t", 0)
				res, err := p.ReadReplica(int32(num("follower")), num("offset"), 1<<20, nil)
				if err != nil {
					fmt.Fprintf(&out, "error: %v\n", err)
				} else {
					fmt.Fprintf(&out, "read %d bytes\n", len(res.Records))
				}
				settle(hadPending)
			case "tick":
				now = now.Add(time.Duration(num("ms")) * time.Millisecond)
				m.checkISRs()
				settle(hadPending)
			case "broker":
				id := int32(num("id"))
				b := metadata.Broker{ID: id}
				switch arg("state") {
				case "fenced":
					b.Fenced = true
				case "shutdown":
					b.InControlledShutdown = true
				case "live":
				default:
					d.Fatalf(t, "unknown broker state %q", arg("state"))
				}
				brokers[id] = b
				apply(cur)
			case "commit", "fail", "refuse":
				if !hasPending() {
					return "no pending proposal\n"
				}
				pr := outstanding[len(outstanding)-1]
				outstanding = outstanding[:len(outstanding)-1]
				switch {
				case d.Cmd == "commit" && cur.PartitionEpoch != pr.epoch:
					fmt.Fprintf(&out, "stale: partition epoch is %d\n", cur.PartitionEpoch)
					pr.done <- metadata.ErrStaleEpoch
				case d.Cmd == "commit":
					mp := cur
					mp.ISR = pr.isr
					mp.PartitionEpoch++
					apply(mp)
					pr.done <- nil
				case d.Cmd == "fail":
					pr.done <- metadata.ErrStaleEpoch
				default:
					pr.done <- metadata.ErrIneligibleReplica
				}
				deadline := time.Now().Add(5 * time.Second)
				for hasPending() {
					if time.Now().After(deadline) {
						t.Fatal("the pending ISR change was never resolved")
					}
					time.Sleep(time.Millisecond)
				}
			case "late-fail":
				// The controller's refusal of the oldest outstanding
				// proposal arrives now, after the image overtook it.
				if len(outstanding) == 0 {
					return "no outstanding proposal\n"
				}
				pr := outstanding[0]
				outstanding = outstanding[1:]
				m.Get("t", 0).alterDone(pr.seq, metadata.ErrStaleEpoch)
				answered = append(answered, pr) // its goroutine is released at the end
			case "wait":
				p := m.Get("t", 0)
				err := p.WaitDurable(num("offset"), lastGen, time.Now(), arg("acks") == "all")
				if err != nil {
					fmt.Fprintf(&out, "not acknowledged: %v\n", err)
				} else {
					out.WriteString("acknowledged\n")
				}
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			for _, pr := range proposals[before:] {
				out.WriteString(pr + "\n")
			}
			p := m.Get("t", 0)
			p.rmu.Lock()
			var fs []string
			ids := make([]int32, 0, len(p.repl.followers))
			for id := range p.repl.followers {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				fs = append(fs, fmt.Sprintf("%d@%d", id, p.repl.followers[id].leo))
			}
			pending := "-"
			if p.repl.pending != nil {
				pending = fmt.Sprint(p.repl.pending)
			}
			fmt.Fprintf(&out, "leader=%v leo=%d synced=%d hw=%d isr=%v pending=%s followers=[%s]",
				p.leading.Load(), p.log.LogEndOffset(), p.synced.Load(), p.hw.Load(), p.repl.isr, pending, strings.Join(fs, " "))
			if wait := p.repl.alterRetryAt - now.UnixMilli(); wait > 0 {
				fmt.Fprintf(&out, " no-proposal-for=%dms", wait) // backing off after a refusal
			}
			p.rmu.Unlock()
			if !p.CaughtUpAsLeader() {
				out.WriteString(" offsets-not-available") // KIP-207
			}
			out.WriteString("\n")
			return out.String()
		})
	})
}
