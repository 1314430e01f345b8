package handler

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/metadata"
)

// Answers name the endpoints of the listener a request came in on; a
// broker without that listener is left out (its coordinator is not
// available there); a registration without endpoints serves every name.
func TestEndpointsOnListener(t *testing.T) {
	im, _, err := metadata.Apply(&metadata.Image{Brokers: map[int32]metadata.Broker{}}, 1, []metadata.Record{
		{RegisterBroker: &metadata.RegisterBroker{ID: 1, Host: "int-1", Port: 9094, Endpoints: []metadata.Endpoint{
			{Name: "INTERNAL", Host: "int-1", Port: 9094}, {Name: "EXTERNAL", Host: "ext-1.example", Port: 19092}}}},
		{RegisterBroker: &metadata.RegisterBroker{ID: 2, Host: "int-2", Port: 9094, Endpoints: []metadata.Endpoint{
			{Name: "INTERNAL", Host: "int-2", Port: 9094}}}},
		{RegisterBroker: &metadata.RegisterBroker{ID: 3, Host: "old-3", Port: 9092}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := im.Broker(1)
	if got, ok := endpointOn(b1, "EXTERNAL"); !ok || got.Host != "ext-1.example" || got.Port != 19092 {
		t.Fatalf("broker 1 on EXTERNAL: %+v %v", got, ok)
	}
	if got, ok := endpointOn(b1, ""); !ok || got.Host != "int-1" {
		t.Fatalf("broker 1 without a listener: %+v %v", got, ok)
	}
	b2, _ := im.Broker(2)
	if _, ok := endpointOn(b2, "EXTERNAL"); ok {
		t.Fatal("broker 2 has no EXTERNAL listener but was answered")
	}
	if err := coordinatorOn(&b2, "EXTERNAL"); !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("coordinator without the listener: %v", err)
	}
	b3, _ := im.Broker(3)
	if got, ok := endpointOn(b3, "EXTERNAL"); !ok || got.Host != "old-3" || got.Port != 9092 {
		t.Fatalf("an old registration: %+v %v", got, ok)
	}

	resp := &kmsg.ProduceResponse{Brokers: []kmsg.ProduceResponseBroker{
		{NodeID: 1, Host: "int-1", Port: 9094}, {NodeID: 2, Host: "int-2", Port: 9094}}}
	produceHintsOn(im, "EXTERNAL", resp)
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host != "ext-1.example" || resp.Brokers[0].Port != 19092 {
		t.Fatalf("produce leader hints on EXTERNAL: %+v", resp.Brokers)
	}
}
