package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Bad flag combinations fail before anything connects (the address is a
// closed port: a connection attempt would fail differently).
func TestClusterElectFlagErrorsBeforeConnecting(t *testing.T) {
	addr := closedPort(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--topic T [--partition N]..., or --all"},
		{[]string{"--all", "--topic", "a"}, "do not go together"},
		{[]string{"--all", "--partition", "1"}, "--partition needs --topic"},
		{[]string{"--partition", "1"}, "--topic T"},
		{[]string{"--topic", "a", "--topic", "b", "--partition", "0"}, "exactly one --topic"},
		{[]string{"--topic", "a", "--partition", "-1"}, "numbered from 0"},
		{[]string{"--topic", " "}, "--topic is empty"},
		{[]string{"--all", "--type", "dirty"}, `--type "dirty": want preferred or unclean`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := runCLI(t, "", append([]string{"cluster", "elect", "-b", addr}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "cannot reach") {
				t.Fatalf("connected before checking the flags: %v", err)
			}
		})
	}
}

func TestClusterElectUnreachable(t *testing.T) {
	addr := closedPort(t)
	_, _, err := runCLI(t, "", "cluster", "elect", "--all", "-b", addr, "--timeout", "5s")
	if err == nil || !strings.Contains(err.Error(), "cannot reach "+addr) {
		t.Fatalf("error %v, want cannot reach %s", err, addr)
	}
}

// electResponse builds a response: "t:0=0,1=84" gives topic t partition 0
// code 0 and partition 1 ELECTION_NOT_NEEDED, each failure with message
// "why N".
func electResponse(top int16, topics ...string) *kmsg.ElectLeadersResponse {
	resp := kmsg.NewPtrElectLeadersResponse()
	resp.Version, resp.ErrorCode = 2, top
	for _, s := range topics {
		name, ps, _ := strings.Cut(s, ":")
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = name
		for p := range strings.SplitSeq(ps, ",") {
			if p == "" {
				continue
			}
			var part int32
			var code int16
			if _, err := fmt.Sscanf(p, "%d=%d", &part, &code); err != nil {
				panic(err)
			}
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = part, code
			if code != 0 {
				msg := kerr.ErrorForCode(code).(*kerr.Error).Message + ": why " + p
				rp.ErrorMessage = &msg
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func TestClusterElectResults(t *testing.T) {
	cf := &clientFlags{bootstrap: "127.0.0.1:9092"}
	resp := electResponse(0, "b:0=80", "a:1=84,0=0")
	results, err := electResults(resp)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := printElect(&out, &errOut, results, kadm.ElectPreferredReplica, false); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"TOPIC  PARTITION  RESULT                          DETAIL\n" +
		"a      0          elected                         \n" +
		"a      1          not needed                      why 1=84\n" +
		"b      0          PREFERRED_LEADER_NOT_AVAILABLE  why 0=80\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
	if got, want := errOut.String(), "Elected 1 of 3 partitions; 1 could not be elected.\n"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	ferr := electFailure(cf, results)
	if ferr == nil || !errors.Is(ferr, kerr.PreferredLeaderNotAvailable) ||
		!strings.Contains(ferr.Error(), "1 partition(s) could not be elected; b-0: PREFERRED_LEADER_NOT_AVAILABLE: why 0=80 (the preferred replica is down") {
		t.Errorf("failure: %v", ferr)
	}

	// JSON keeps every row, with the code and the broker's message.
	var js bytes.Buffer
	if err := writeJSON(&js, results); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(js.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[1]["result"] != "not-needed" || rows[1]["error"] != "ELECTION_NOT_NEEDED" ||
		rows[2]["result"] != "failed" || rows[2]["message"] != "why 0=80" || rows[0]["error"] != nil {
		t.Errorf("JSON rows: %s", js.String())
	}
}

func TestClusterElectNothingToDo(t *testing.T) {
	for _, tc := range []struct {
		resp *kmsg.ElectLeadersResponse
		how  kadm.ElectLeadersHow
		all  bool
		want string
	}{
		{electResponse(0, "a:0=84,1=84"), kadm.ElectPreferredReplica, false, "Nothing to do: every partition named already has its preferred replica as leader.\n"},
		{electResponse(0, "a:", "b:"), kadm.ElectPreferredReplica, true, "Nothing to do: every partition already has its preferred replica as leader.\n"},
		{electResponse(0), kadm.ElectLiveReplica, true, "Nothing to do: every partition already has a live leader.\n"},
	} {
		results, err := electResults(tc.resp)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		if err := printElect(&out, &errOut, results, tc.how, tc.all); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want || errOut.Len() != 0 {
			t.Errorf("got %q (stderr %q), want %q", out.String(), errOut.String(), tc.want)
		}
		if err := electFailure(&clientFlags{}, results); err != nil {
			t.Errorf("nothing to do is not a failure: %v", err)
		}
	}
}

// A top-level error (v1+) is the command's error even when no partition
// carries it, as with --all on a node that is not the controller.
func TestClusterElectTopLevelError(t *testing.T) {
	_, err := electResults(electResponse(kerr.NotController.Code))
	if !errors.Is(err, kerr.NotController) {
		t.Fatalf("error %v, want NOT_CONTROLLER", err)
	}
}

// Against a broker: NOT_CONTROLLER while the broker runs no elections,
// "nothing to do" once it does (one node has every preferred leader).
func TestIntegrationClusterElect(t *testing.T) {
	addr := integrationBootstrap(t)
	topic := uniqueTopic(t)
	if _, _, err := runCLI(t, "", "topic", "create", topic, "--partitions", "2", "-b", addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runCLI(t, "", "topic", "delete", topic, "-b", addr) })

	out, _, err := runCLI(t, "", "cluster", "elect", "--all", "-b", addr, "--timeout", "5s")
	if err != nil {
		if !errors.Is(err, kerr.NotController) {
			t.Fatalf("--all: %v", err)
		}
		t.Logf("the broker runs no elections (NOT_CONTROLLER): %v", err)
		// Named partitions: kgo retries NOT_CONTROLLER until --timeout.
		_, _, err = runCLI(t, "", "cluster", "elect", "--topic", topic, "-b", addr, "--timeout", "3s")
		if !errors.Is(err, kerr.NotController) {
			t.Fatalf("--topic: error %v, want NOT_CONTROLLER", err)
		}
		return
	}
	if want := "Nothing to do: every partition already has its preferred replica as leader.\n"; out != want {
		t.Errorf("--all: %q, want %q", out, want)
	}
	out, _, err = runCLI(t, "", "cluster", "elect", "--topic", topic, "--type", "unclean", "-b", addr)
	if err != nil || out != "Nothing to do: every partition named already has a live leader.\n" {
		t.Errorf("--topic --type unclean: %q, %v", out, err)
	}
	out, _, err = runCLI(t, "", "cluster", "elect", "--topic", topic, "--partition", "1", "--partition", "7", "--json", "-b", addr)
	var rows []electResult
	if jerr := json.Unmarshal([]byte(out), &rows); jerr != nil {
		t.Fatalf("--json output %q: %v", out, jerr)
	}
	if len(rows) != 2 || rows[0].Result != "not-needed" || rows[1].Error != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("--json rows %+v", rows)
	}
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("partition 7 does not exist: error %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if _, _, err := runCLI(t, "", "cluster", "elect", "--topic", topic+"-missing", "-b", addr); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("unknown topic: error %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}
