package handler

// DescribeLogDirs, versions 0-5: the one log directory with each
// partition's size, and total and usable bytes (v4+).

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/replica"
	"github.com/berthmq/berth/internal/server"
)

func init() { register(35, 0, 5, (*Broker).describeLogDirs) }

func (b *Broker) describeLogDirs(_ context.Context, req *server.Request) (server.Reply, error) {
	r := req.Body.(*kmsg.DescribeLogDirsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !b.authorizedCluster(req, opDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code // v3+; older versions see no directories
		return now(resp), nil
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	abs, err := filepath.Abs(b.Broker.Get("log.dirs"))
	if err != nil {
		abs = b.Broker.Get("log.dirs")
	}
	dir.Dir = abs
	var st syscall.Statfs_t
	if syscall.Statfs(abs, &st) == nil {
		dir.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
		dir.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
	} else {
		dir.TotalBytes, dir.UsableBytes = -1, -1
	}
	add := func(topic string, ps []*replica.Partition, want map[int32]bool) {
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = topic
		for _, p := range ps {
			if p == nil || want != nil && !want[p.Index] {
				continue
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition, dp.Size = p.Index, p.Log().Size()
			dt.Partitions = append(dt.Partitions, dp)
		}
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	if r.Topics == nil {
		for _, name := range b.image().TopicNames() {
			add(name, b.Replicas.Partitions(name), nil)
		}
	} else {
		for _, rt := range r.Topics {
			want := map[int32]bool{}
			for _, p := range rt.Partitions {
				want[p] = true
			}
			add(rt.Topic, b.Replicas.Partitions(rt.Topic), want)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return now(resp), nil
}
