package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/metadata"
	"github.com/berthmq/berth/internal/testports"
)

// Three nodes in one process form a metadata quorum over loopback TCP; a
// topic created through one of them has the same metadata on all three.
func TestThreeNodeQuorumAgreesOnTopic(t *testing.T) {
	// Below the ephemeral range: a port freed after ":0" could be taken
	// by an outgoing connection before the node binds it.
	addrs := testports.Addrs(t, 3)
	voters := fmt.Sprintf("0@%s,1@%s,2@%s", addrs[0], addrs[1], addrs[2])
	nodes := make([]*Node, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		cfg := config.Defaults()
		for k, v := range map[string]string{
			"node.id":                               fmt.Sprint(i),
			"log.dirs":                              t.TempDir(),
			"listeners":                             "PLAINTEXT://127.0.0.1:0",
			"http.listener":                         "",
			"log.dir.min.free.bytes":                "0",
			"controller.quorum.voters":              voters,
			"controller.quorum.election.timeout.ms": "300",
			"controller.quorum.startup.timeout.ms":  "20000",
			// Closing one node after another leaves the last without a
			// controller to hand leaderships to; not what this tests.
			"controlled.shutdown.enable": "false",
		} {
			if err := cfg.Set(k, v, config.SourceFlag); err != nil {
				t.Fatal(err)
			}
		}
		logger := slog.New(slog.NewTextHandler(io.Discard, nil))
		wg.Go(func() { nodes[i], errs[i] = Start(context.Background(), cfg, logger) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		t.Cleanup(func() { nodes[i].Close() })
	}

	// Every node registered itself, through whichever node leads.
	waitAgree(t, nodes, func(im *metadata.Image) error {
		if len(im.Brokers) != 3 {
			return fmt.Errorf("%d brokers registered", len(im.Brokers))
		}
		return nil
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(nodes[1].KafkaAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "agreed")
	if err != nil || resp.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, resp.Err)
	}
	waitAgree(t, nodes, func(im *metadata.Image) error {
		if tp := im.Topic("agreed"); tp == nil || len(tp.Partitions) != 3 {
			return fmt.Errorf("topic agreed: %+v", tp)
		}
		return nil
	})
}

// waitAgree polls until every node's image passes check and all encode to
// the same bytes.
func waitAgree(t *testing.T, nodes []*Node, check func(*metadata.Image) error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := func() error {
			want := metadata.EncodeImage(nodes[0].ctrl.Image())
			for i, n := range nodes {
				im := n.ctrl.Image()
				if err := check(im); err != nil {
					return fmt.Errorf("node %d: %w", i, err)
				}
				if got := metadata.EncodeImage(im); !bytes.Equal(got, want) {
					return fmt.Errorf("node %d image differs from node 0's:\n%s\n%s", i, got, want)
				}
			}
			return nil
		}()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(strings.TrimSpace(err.Error()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
