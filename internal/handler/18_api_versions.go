package handler

// ApiVersions, versions 0-4. The list comes from each API file's
// register call. Not honoured: supported/finalized features (KIP-584) are
// sent empty. An unsupported ApiVersions version is answered at v0 with
// UNSUPPORTED_VERSION and our ranges by the server package (KIP-511).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(18, 0, 4, (*Broker).apiVersions) }

func (b *Broker) apiVersions(_ context.Context, req *server.Request) (server.Reply, error) {
	resp := req.Body.(*kmsg.ApiVersionsRequest).ResponseKind().(*kmsg.ApiVersionsResponse)
	for _, a := range append(Served(), Extensions()...) { // Berth's keys too: kgo sends only listed keys
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: a.Key, MinVersion: a.Min, MaxVersion: a.Max})
	}
	return now(resp), nil
}
