package handler

// The long poll of Fetch (01_fetch.go) and ShareFetch (78_share_fetch.go).
// It runs in the Reply, on the connection's write loop, so a wait holds
// up only later answers on the same connection.

import (
	"time"

	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/server"
)

// maxFetchWait bounds a long poll whatever the client asks.
const maxFetchWait = 5 * time.Minute

// longPoll reads until the request can be answered, waiting up to
// maxWaitMillis (at most maxFetchWait) in between. read reads once and
// says whether it is done (enough to answer, or an error) and which
// partitions to watch for new data. The poll ends after a read that is
// done or has nothing to watch, at once when the wait is not positive,
// and when the deadline passes, with one last read. Between reads it
// waits until a watched partition has new data, changed (if set, taken
// before each read, so that a change after the read wakes it) is closed,
// the deadline passes or the connection closes; on the last it returns
// false, without reading again.
func longPoll(conn *server.Conn, maxWaitMillis int32, changed func() <-chan struct{}, read func() (done bool, watch []*replica.Partition)) bool {
	wait := min(time.Duration(maxWaitMillis)*time.Millisecond, maxFetchWait)
	deadline := time.Now().Add(wait)
	var w *replica.Waiter
	defer func() {
		if w != nil {
			w.Done()
		}
	}()
	var timer *time.Timer
	for {
		var woken <-chan struct{} // nil: no wake-up but new data
		if changed != nil {
			woken = changed() // before reading: a change after it wakes us
		}
		done, watch := read()
		if done || wait <= 0 || !time.Now().Before(deadline) || len(watch) == 0 {
			return true
		}
		if w == nil {
			w = replica.NewWaiter()
			for _, p := range watch {
				p.Watch(w)
			}
			timer = time.NewTimer(time.Until(deadline))
			defer timer.Stop()
			continue // re-read: data may have arrived before we watched
		}
		select {
		case <-w.C:
		case <-woken:
		case <-timer.C:
			read()
			return true
		case <-conn.Context().Done():
			return false
		}
	}
}
