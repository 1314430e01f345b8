package handler

// ApiVersions, versions 0-4. The list comes from each API file's
// register call. Features (KIP-584, v3+): Berth supports and finalizes
// transaction.version (KIP-890), at the level the broker config
// transaction.version sets (2 by default: clients such as kgo then use
// Transactions V2); no other feature is advertised. An unsupported
// ApiVersions version is answered at v0 with UNSUPPORTED_VERSION and our
// ranges by the server package (KIP-511).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(18, 0, 4, (*Broker).apiVersions) }

// maxTransactionVersion is the highest transaction.version Berth speaks.
const maxTransactionVersion = 2

func (b *Broker) apiVersions(_ context.Context, req *server.Request) (server.Reply, error) {
	resp := req.Body.(*kmsg.ApiVersionsRequest).ResponseKind().(*kmsg.ApiVersionsResponse)
	for _, a := range append(Served(), Extensions()...) { // Berth's keys too: kgo sends only listed keys
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: a.Key, MinVersion: a.Min, MaxVersion: a.Max})
	}
	resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{
		{Name: "transaction.version", MinVersion: 0, MaxVersion: maxTransactionVersion},
	}
	// The finalized level is a broker setting, not a metadata record: the
	// epoch is constant.
	resp.FinalizedFeaturesEpoch = 1
	if tv := b.transactionVersion(); tv > 0 { // level 0 is not listed, as in Kafka
		resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{
			{Name: "transaction.version", MinVersionLevel: tv, MaxVersionLevel: tv},
		}
	}
	return now(resp), nil
}

// transactionVersion is the finalized transaction.version.
func (b *Broker) transactionVersion() int16 {
	if b.Broker == nil {
		return maxTransactionVersion
	}
	return int16(b.Broker.Int("transaction.version"))
}
