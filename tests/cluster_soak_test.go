package tests

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// Random faults, one at a time, for $BERTH_FAULT_SOAK (a duration, e.g.
// 5m; the test is skipped when it is unset): each round picks a node and
// one of kill -9, SIGTERM, SIGSTOP or a cut from the quorum from the
// seed, holds it for 0.5-5 s, undoes it (restart, SIGCONT, heal), and
// waits for every ISR to be full again and for writes to every partition
// before the next. The history is checked at the end as in the other
// fault tests. Replay a failure with its BERTH_FAULT_SEED.
func TestClusterRandomFaultsSoak(t *testing.T) {
	soak := os.Getenv("BERTH_FAULT_SOAK")
	if soak == "" {
		t.Skip("set BERTH_FAULT_SOAK to a duration (e.g. 5m) to run random faults for that long")
	}
	total, err := time.ParseDuration(soak)
	if err != nil {
		t.Fatalf("BERTH_FAULT_SOAK: %v", err)
	}
	r := newFaultRig(t, 3)
	l := r.startLoad()
	end := time.Now().Add(total)
	rounds := 0
	for ; time.Now().Before(end) && rounds < 1000; rounds++ {
		ids := r.c.IDs()
		id := ids[r.rng.IntN(len(ids))]
		hold := 500*time.Millisecond + time.Duration(r.rng.Int64N(int64(4500*time.Millisecond)))
		var undo func()
		switch r.rng.IntN(4) {
		case 0:
			r.c.Kill(id)
			r.h.Fault("round %d: kill -9 node %d for %v", rounds, id, hold)
			undo = func() { r.c.Restart(id) }
		case 1:
			r.h.Fault("round %d: SIGTERM node %d for %v", rounds, id, hold)
			r.c.Stop(id)
			undo = func() { r.c.Restart(id) }
		case 2:
			r.c.Pause(id)
			r.h.Fault("round %d: SIGSTOP node %d for %v", rounds, id, hold)
			undo = func() { r.c.Resume(id) }
		case 3:
			r.c.Cut(id)
			r.h.Fault("round %d: cut node %d off the quorum for %v", rounds, id, hold)
			undo = func() { r.c.Heal(id) }
		}
		time.Sleep(hold) // the fault's duration, not a wait for a state
		undo()
		back := r.h.Fault("round %d: node %d back", rounds, id)
		r.waitFullISR(r.others(id)[0], rejoinBound)
		r.waitAcks(back, resumeBound, fmt.Sprintf("round %d: writes on every partition", rounds))
	}
	t.Logf("%d rounds of faults in %v", rounds, total)
	r.finish(l)
}
