package metadata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestApply runs testdata/apply: each "apply" block is one entry, a batch of
// records given as one JSON Record per line; the output is the result and
// the image after it. Regenerate with: go test ./internal/metadata/ -run
// TestApply -rewrite
//
// Every step also checks that Apply left the previous image untouched
// (copy-on-write) and that the image survives a snapshot round trip.
func TestApply(t *testing.T) {
	datadriven.Walk(t, "testdata/apply", func(t *testing.T, path string) {
		im := emptyImage()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "reset":
				im = emptyImage()
				return dumpImage(im)
			case "apply":
				var recs []Record
				for _, line := range strings.Split(d.Input, "\n") {
					if strings.TrimSpace(line) == "" {
						continue
					}
					var r Record
					dec := json.NewDecoder(strings.NewReader(line))
					dec.DisallowUnknownFields()
					if err := dec.Decode(&r); err != nil {
						d.Fatalf(t, "bad record %q: %v", line, err)
					}
					recs = append(recs, r)
				}
				// Through the entry encoding, as the controller does.
				data, err := EncodeEntry(1, 1, recs)
				if err != nil {
					return fmt.Sprintf("encode error: %v\n", err)
				}
				entry, err := decodeEntry(data)
				if err != nil {
					t.Fatalf("decode entry %s: %v", data, err)
				}
				before := EncodeImage(im)
				next, res, err := Apply(im, im.Index+1, entry.Records)
				if after := EncodeImage(im); !bytes.Equal(before, after) {
					t.Fatalf("Apply modified its input image:\nbefore %s\nafter  %s", before, after)
				}
				enc := EncodeImage(next)
				back, derr := DecodeImage(enc)
				if derr != nil {
					t.Fatalf("decode image: %v", derr)
				}
				if again := EncodeImage(back); !bytes.Equal(enc, again) {
					t.Fatalf("image round trip differs:\n%s\n%s", enc, again)
				}
				im = next
				var b strings.Builder
				if err != nil {
					fmt.Fprintf(&b, "error: %v\n", err)
				} else {
					b.WriteString("ok\n")
				}
				if len(res.ProducerIDs) > 0 {
					fmt.Fprintf(&b, "producer ids from %v\n", res.ProducerIDs)
				}
				b.WriteString(dumpImage(im))
				return b.String()
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
				return ""
			}
		})
	})
}

// dumpImage prints an image in a stable, readable form.
func dumpImage(im *Image) string {
	var b strings.Builder
	fmt.Fprintf(&b, "index=%d cluster=%q next-pid=%d\n", im.Index, im.ClusterID, im.NextProducerID)
	for _, id := range im.BrokerIDs() {
		br := im.Brokers[id]
		fmt.Fprintf(&b, "broker %d %s:%d", br.ID, br.Host, br.Port)
		if br.Rack != "" {
			fmt.Fprintf(&b, " rack=%s", br.Rack)
		}
		if br.Fenced {
			b.WriteString(" fenced")
		}
		if br.InControlledShutdown {
			b.WriteString(" in-controlled-shutdown")
		}
		b.WriteString("\n")
	}
	if len(im.BrokerConfigs) > 0 {
		fmt.Fprintf(&b, "broker-configs %s\n", dumpConfigs(im.BrokerConfigs))
	}
	for _, g := range slices.Sorted(maps.Keys(im.GroupConfigs)) {
		fmt.Fprintf(&b, "group-configs %s %s\n", g, dumpConfigs(im.GroupConfigs[g]))
	}
	for _, q := range encodeClientQuotas(im) {
		fmt.Fprintf(&b, "client-quotas %s %v\n", mustEntity(q.Entity), q.Values)
	}
	for _, a := range im.ACLs.All() {
		fmt.Fprintf(&b, "acl %s\n", a)
	}
	for _, name := range im.TopicNames() {
		tp := im.Topics[name]
		if im.TopicIDs[tp.ID] != name {
			fmt.Fprintf(&b, "BROKEN: topic id %s maps to %q\n", FormatUUID(tp.ID), im.TopicIDs[tp.ID])
		}
		fmt.Fprintf(&b, "topic %s id=%s", name, FormatUUID(tp.ID))
		if tp.Internal {
			b.WriteString(" internal")
		}
		if len(tp.Configs) > 0 {
			fmt.Fprintf(&b, " configs=%s", dumpConfigs(tp.Configs))
		}
		b.WriteString("\n")
		for _, p := range tp.Partitions {
			fmt.Fprintf(&b, "  p%d leader=%d leader-epoch=%d partition-epoch=%d replicas=%v isr=%v",
				p.Index, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.Replicas, p.ISR)
			if p.Reassigning() {
				fmt.Fprintf(&b, " adding=%v removing=%v", p.AddingReplicas, p.RemovingReplicas)
			}
			b.WriteString("\n")
		}
	}
	if len(im.TopicIDs) != len(im.Topics) {
		fmt.Fprintf(&b, "BROKEN: %d topic ids for %d topics\n", len(im.TopicIDs), len(im.Topics))
	}
	return b.String()
}

func dumpConfigs(m map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, k+"="+m[k])
	}
	return "{" + strings.Join(kv, " ") + "}"
}

// TestApplySharesUnchanged checks copy-on-write: what a batch does not
// touch is shared with the previous image, what it touches is not.
func TestApplySharesUnchanged(t *testing.T) {
	im := emptyImage()
	mk := func(name string, id byte) Record {
		return Record{CreateTopic: &CreateTopic{Name: name, ID: [16]byte{15: id}, Partitions: 2, Replicas: [][]int32{{0}, {0}}}}
	}
	im, _, err := Apply(im, 1, []Record{mk("a", 1), mk("b", 2)})
	if err != nil {
		t.Fatal(err)
	}
	next, _, err := Apply(im, 2, []Record{{SetTopicConfigs: &SetTopicConfigs{Name: "b", Set: map[string]string{"k": "v"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if next.Topics["a"] != im.Topics["a"] {
		t.Error("untouched topic a was copied")
	}
	if next.Topics["b"] == im.Topics["b"] || len(im.Topics["b"].Configs) != 0 {
		t.Error("topic b was changed in place")
	}
	if &next.Topics["b"].Partitions[0] == &im.Topics["b"].Partitions[0] {
		t.Error("a copied topic shares its Partitions array")
	}
	next2, _, err := Apply(next, 3, []Record{{ProducerIDBlock: &ProducerIDBlock{Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%p", next2.Topics) != fmt.Sprintf("%p", next.Topics) {
		t.Error("a batch without topic changes copied the topic map")
	}
}
