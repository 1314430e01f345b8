package handler

// DeleteRecords, versions 0-2: moves a partition's log start offset
// (offset -1 means the high watermark) and deletes the segments wholly
// below it. The new log start survives restarts.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/server"
)

func init() { register(21, 0, 2, (*Broker).deleteRecords) }

func (b *Broker) deleteRecords(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DeleteRecordsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	im := b.image()
	for _, rt := range r.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t, terr := b.lookupTopicFor(req, im, opDelete, rt.Topic, [16]byte{}, false)
		if terr == nil {
			terr = b.internalTopicRefused(req, t, "delete records of")
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			err := terr
			if err == nil {
				p, perr := b.partition(t, rp.Partition)
				if err = perr; err == nil {
					sp.LowWatermark, err = p.DeleteRecordsBefore(rp.Offset)
					if err == nil {
						b.log.Info("records deleted", "topic", t.Name, "partition", rp.Partition, "log_start_offset", sp.LowWatermark)
					}
				}
			}
			if err != nil {
				sp.ErrorCode = code(err)
				sp.LowWatermark = -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp), nil
}
