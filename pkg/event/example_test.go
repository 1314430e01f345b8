package event_test

import (
	"fmt"

	"github.com/berthmq/berth/pkg/event"
)

// A producer names the event once; every copy of the record (a relay's,
// a retry's, a dead letter's) keeps the id, and consumers deduplicate on
// it.
func Example() {
	r := event.New("orders", []byte("order:HC-2048"), []byte(`{"id":"HC-2048","total":42.5}`),
		event.WithID("order-HC-2048-placed"),
		event.WithContentType(event.JSON),
		event.WithTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	id, _ := event.ID(r)
	ct, _ := event.ContentType(r)
	fmt.Println(id, ct)
	// Output: order-HC-2048-placed application/json
}
