package config

import (
	"strings"
	"testing"
)

func TestParseQuorumVoters(t *testing.T) {
	vs, err := ParseQuorumVoters("1@h1:9093, 2@[::1]:9093,3@h3:9095")
	if err != nil || len(vs) != 3 || vs[1] != (QuorumVoter{ID: 2, Addr: "[::1]:9093"}) {
		t.Fatalf("%+v %v", vs, err)
	}
	if vs, err := ParseQuorumVoters(""); vs != nil || err != nil {
		t.Fatalf("empty: %v %v", vs, err)
	}
	for _, bad := range []string{"h1:9093", "x@h1:9093", "-1@h:1", "1@h1", "1@:9093", "1@h:0", "1@h:1,1@h:2"} {
		if _, err := ParseQuorumVoters(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestValidateControllerListener(t *testing.T) {
	for _, tc := range []struct {
		listeners, voters, node, wantErr string
	}{
		{"PLAINTEXT://127.0.0.1:9092", "", "1", ""},
		{"PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "1@127.0.0.1:9093", "1", ""},
		{"CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092", "1@127.0.0.1:9093", "1", ""},
		{"PLAINTEXT://127.0.0.1:9092", "1@127.0.0.1:9093", "1", ""},
		{"PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "", "1", "controller.quorum.voters is empty"},
		{"PLAINTEXT://127.0.0.1:9092", "1@127.0.0.1:9093", "4", "joins the quorum as an observer"},
		{"PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:0", "1@127.0.0.1:9093", "4", ""},
		{"PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093", "", "1", "used twice"},
	} {
		c := Defaults()
		c.Set("listeners", tc.listeners, SourceFlag)
		c.Set("controller.quorum.voters", tc.voters, SourceFlag)
		c.Set("node.id", tc.node, SourceFlag)
		err := c.Validate()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
	c := Defaults()
	c.Set("listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", SourceFlag)
	k, ctl, ok, err := c.Listeners()
	if err != nil || !ok || k.Port != 9092 || ctl.Port != 9093 || ctl.Name != "CONTROLLER" {
		t.Fatalf("Listeners: %+v %+v %v %v", k, ctl, ok, err)
	}
}
