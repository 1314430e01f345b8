package tests

// AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932) through
// kadm, as kafka-share-groups.sh --reset-offsets and --delete-offsets
// use them: refused while the group has members, then moving where the
// group's consumers start.

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	tc "github.com/berthmq/berth/internal/testcluster"
)

func TestShareGroupOffsetsAlterAndDelete(t *testing.T) {
	n := tc.Start(t)
	tc.CreateTopic(t, n.Addr(), "jobs", 1, nil)
	prod := tc.Client(t, n.Addr())
	var old []*kgo.Record
	for i := range 10 {
		old = append(old, &kgo.Record{Topic: "jobs", Key: []byte("old"), Value: []byte(strconv.Itoa(i))})
	}
	produceSync(t, prod, old...) // offsets 0-9, before the group exists
	adm := tc.Admin(t, n.Addr())
	ctx := ctxT(t, 90*time.Second)

	cl := shareConsumer(t, n.Addr(), "g", "jobs")
	warmShare(t, prod, cl, "jobs") // the group starts at the end (latest): offset 10 on
	at := kadm.Offsets{}
	at.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 3})
	if _, err := adm.AlterShareGroupOffsets(ctx, "g", at); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("altering the offsets of a group with a member: %v, want NON_EMPTY_GROUP", err)
	}
	cl.Close()

	// Once the member has left, the group starts over at offset 3:
	// records 3-9 and the (accepted, now forgotten) warm-up record.
	tc.Eventually(t, 30*time.Second, func() error {
		rs, err := adm.AlterShareGroupOffsets(ctx, "g", at)
		if err != nil {
			return err
		}
		return rs.Error()
	})
	cl2 := shareConsumer(t, n.Addr(), "g", "jobs")
	got := map[int64]bool{}
	tc.Eventually(t, 30*time.Second, func() error {
		for _, r := range pollFor(t, cl2, time.Second) {
			if r.Offset < 3 {
				t.Fatalf("offset %d delivered after the start offset moved to 3", r.Offset)
			}
			got[r.Offset] = true
			r.Ack(kgo.AckAccept)
		}
		for o := int64(3); o <= 10; o++ {
			if !got[o] {
				return fmt.Errorf("offset %d not delivered yet (got %v)", o, got)
			}
		}
		return cl2.FlushAcks(ctxT(t, 10*time.Second))
	})
	cl2.Close()

	// Deleting the offsets forgets the state: the next consumer starts
	// at share.auto.offset.reset (latest), past everything so far.
	tc.Eventually(t, 30*time.Second, func() error {
		rs, err := adm.DeleteShareGroupOffsets(ctx, "g", "jobs")
		if err != nil {
			return err
		}
		return rs.Error()
	})
	if rs, err := adm.DeleteShareGroupOffsets(ctx, "g", "nope"); err != nil || !errors.Is(rs["nope"], kerr.UnknownTopicOrPartition) {
		t.Fatalf("deleting the offsets of an unknown topic: %v / %v, want UNKNOWN_TOPIC_OR_PARTITION", rs, err)
	}
	cl3 := shareConsumer(t, n.Addr(), "g", "jobs")
	tc.Eventually(t, 60*time.Second, func() error {
		produceSync(t, prod, &kgo.Record{Topic: "jobs", Key: []byte("new")})
		for _, r := range pollFor(t, cl3, time.Second) {
			r.Ack(kgo.AckAccept)
			if string(r.Key) != "new" {
				t.Fatalf("offset %d (%s) delivered after the group's offsets were deleted", r.Offset, r.Key)
			}
			return nil
		}
		return errors.New("nothing delivered yet")
	})
}
