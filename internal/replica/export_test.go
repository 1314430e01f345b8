package replica

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// PeerRequest sends one request over a fresh broker-to-broker connection
// (tests in package replica_test).
func PeerRequest(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	c, err := dialPeer(ctx, addr, "test")
	if err != nil {
		return nil, err
	}
	defer c.close()
	return c.request(ctx, req, 10*time.Second)
}
