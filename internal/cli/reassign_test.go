package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestReassignMoves(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[2,3]},{"topic":"b","partition":1,"replicas":[1]}]}`), 0o644)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"partitions":[{"topic":"a","partition":0}]}`), 0o644)
	cmd := &cobra.Command{}
	for _, tc := range []struct {
		name string
		o    reassignOpts
		want []move
		err  string
	}{
		{"one", reassignOpts{topic: "a", partition: 2, replicas: []int32{3, 1}}, []move{{"a", 2, []int32{3, 1}}}, ""},
		{"plan", reassignOpts{plan: plan, partition: -1}, []move{{"a", 0, []int32{2, 3}}, {"b", 1, []int32{1}}}, ""},
		{"cancel plan", reassignOpts{plan: plan, partition: -1, cancel: true}, []move{{"a", 0, nil}, {"b", 1, nil}}, ""},
		{"cancel one", reassignOpts{topic: "a", partition: 0, cancel: true}, []move{{"a", 0, nil}}, ""},
		{"no partition", reassignOpts{topic: "a", partition: -1, replicas: []int32{1}}, nil, "--topic needs --partition"},
		{"no replicas", reassignOpts{topic: "a", partition: 0}, nil, "--replicas is required"},
		{"nothing", reassignOpts{partition: -1}, nil, "name the moves"},
		{"both", reassignOpts{plan: plan, topic: "a"}, nil, "either --plan"},
		{"bad plan", reassignOpts{plan: bad, partition: -1}, nil, "needs a topic, a partition and replicas"},
		{"missing plan", reassignOpts{plan: filepath.Join(dir, "nope"), partition: -1}, nil, "no such file"},
	} {
		got, err := tc.o.moves(cmd)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !slices.EqualFunc(got, tc.want, func(a, b move) bool {
			return a.topic == b.topic && a.partition == b.partition && slices.Equal(a.replicas, b.replicas) && (a.replicas == nil) == (b.replicas == nil)
		}) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
