package metadata

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/berthmq/berth/internal/vfs"
)

// recovered is what recover found in the metadata directory.
type recovered struct {
	ms      *raft.MemoryStorage
	wal     *wal
	snap    *pb.Snapshot // newest snapshot; nil when there is none
	hs      *pb.HardState
	fresh   bool  // nothing on disk: bootstrap
	dropped int64 // bytes truncated from a torn WAL tail
}

// recoverDir loads the newest snapshot and the WAL of dir into a
// MemoryStorage, truncating a torn WAL tail. See docs/format/metadata.md
// "Recovery".
func recoverDir(fsys vfs.FS, dir string, log *slog.Logger) (*recovered, error) {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, n := range names { // leftovers of interrupted atomic writes
		if strings.HasSuffix(n, vfs.TempSuffix) {
			if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
				return nil, err
			}
		}
	}
	r := &recovered{ms: raft.NewMemoryStorage()}

	snaps, err := listSnapshots(fsys, dir)
	if err != nil {
		return nil, err
	}
	var snapIndex, snapTerm uint64
	if len(snaps) > 0 {
		newest := snaps[len(snaps)-1]
		r.snap, err = readSnapshot(fsys, filepath.Join(dir, snapName(newest)))
		if err != nil {
			return nil, err
		}
		if err := r.ms.ApplySnapshot(r.snap); err != nil {
			return nil, err
		}
		snapIndex, snapTerm = newest, r.snap.GetMetadata().GetTerm()
		for _, i := range snaps[:len(snaps)-1] { // a crash kept an older one
			removeFile(fsys, dir, snapName(i))
		}
	}

	path := filepath.Join(dir, walName)
	b, err := vfs.ReadFile(fsys, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := replaceFile(fsys, path, walHeader()); err != nil {
			return nil, err
		}
		b = walHeader()
	case err != nil:
		return nil, err
	}
	recs, valid, err := readWAL(b)
	var cerr *CorruptionError
	switch {
	case errors.As(err, &cerr):
		cerr.File = path
		r.dropped = int64(len(b)) - valid
		log.Warn("metadata: truncating damaged WAL tail", "file", path, "offset", valid,
			"bytes", r.dropped, "reason", cerr.Reason)
		if err := truncateFile(fsys, path, valid); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("%s: %w", path, err)
	}

	// Rebuild the log: entries at or below the snapshot are already in it;
	// an entry at index i replaces i and everything after (Raft overwrote a
	// conflicting tail); a gap is corruption.
	var logEnts []*pb.Entry
	last := snapIndex
	for _, rec := range recs {
		if rec.hs != nil {
			r.hs = rec.hs
			continue
		}
		i := rec.entry.GetIndex()
		switch {
		case i <= snapIndex:
			continue
		case i > last+1:
			return nil, &CorruptionError{File: path, Reason: fmt.Sprintf("log gap: entry %d after %d", i, last)}
		}
		logEnts = append(logEnts[:i-snapIndex-1], rec.entry)
		last = i
	}
	if err := r.ms.Append(logEnts); err != nil {
		return nil, err
	}
	// The HardState's commit is synced lazily, so it may trail the
	// snapshot; a missing HardState after a snapshot takes its term.
	if r.hs == nil {
		r.hs = &pb.HardState{}
	}
	if r.hs.GetCommit() < snapIndex {
		r.hs.Commit = new(snapIndex)
	}
	if r.hs.GetTerm() < snapTerm {
		r.hs.Term = new(snapTerm)
	}
	if r.hs.GetCommit() > last {
		return nil, &CorruptionError{File: path, Reason: fmt.Sprintf("commit %d beyond last entry %d", r.hs.GetCommit(), last)}
	}
	if !raft.IsEmptyHardState(r.hs) {
		if err := r.ms.SetHardState(r.hs); err != nil {
			return nil, err
		}
	}
	r.fresh = r.snap == nil && last == 0 && raft.IsEmptyHardState(r.hs)
	if r.wal, err = openWAL(fsys, dir, valid); err != nil {
		return nil, err
	}
	return r, nil
}

func truncateFile(fsys vfs.FS, path string, size int64) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func removeFile(fsys vfs.FS, dir, name string) { fsys.Remove(filepath.Join(dir, name)) }
