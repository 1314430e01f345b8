package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/berthmq/berth/internal/vfs"
)

// Files in a partition directory besides the segments. See docs/format/log.md.
const (
	cleanShutdownFile    = ".clean-shutdown"
	logStartFile         = "log-start-offset-checkpoint"
	recoveryPointFile    = "recovery-point-offset-checkpoint"
	leaderEpochFile      = "leader-epoch-checkpoint"
	producerSnapshotFile = "producer-state.snapshot"
)

// replaceFile replaces name with data through vfs.WriteFileAtomic (the new
// file and the directory are fsynced), a full disk reported as ErrDiskFull.
func replaceFile(fs vfs.FS, name string, data []byte) error {
	if err := vfs.WriteFileAtomic(fs, name, data); err != nil {
		return fmt.Errorf("log: %w", wrapDiskFull(err))
	}
	return nil
}

// keepOrReplaceFile is replaceFile, except when name already holds data.
// Then a file only ever written through replaceFile is left alone: its
// bytes were fsynced before they got its name. One written otherwise
// (syncIfKept: the active segment's indexes, which CheckpointIndex appends
// to without an fsync) is fsynced. Either way its name was made durable
// by an fsync of its directory already (replaceFile's; a created index
// file marks the directory for the next Sync) or is by the next one (Close
// writes the clean-shutdown marker last). A clean stop of a partition that took no writes since it opened
// thus replaces no file but the marker: with 10,000 idle partitions, a
// quarter of a minute of fsyncs, renames and directory fsyncs saved.
func keepOrReplaceFile(fs vfs.FS, name string, data []byte, syncIfKept bool) error {
	if f, err := fs.OpenFile(name, os.O_RDONLY, 0); err == nil {
		same := false
		if fi, err := f.Stat(); err == nil && fi.Size() == int64(len(data)) {
			old := make([]byte, len(data))
			n, err := f.ReadAt(old, 0)
			same = n == len(data) && (err == nil || errors.Is(err, io.EOF)) && bytes.Equal(old, data)
		}
		if same && syncIfKept {
			same = f.Sync() == nil
		}
		if f.Close() == nil && same {
			return nil
		}
	}
	return replaceFile(fs, name, data)
}

// Checkpoints use Kafka's text layout: a version line (0), an entry count
// line, then one entry per line with space-separated fields.

func encodeCheckpoint(entries [][2]int64, fields int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(entries))
	for _, e := range entries {
		if fields == 1 {
			fmt.Fprintf(&b, "%d\n", e[0])
		} else {
			fmt.Fprintf(&b, "%d %d\n", e[0], e[1])
		}
	}
	return b.Bytes()
}

var errBadCheckpoint = errors.New("malformed checkpoint")

func decodeCheckpoint(b []byte, fields int) ([][2]int64, error) {
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 || lines[len(lines)-1] != "" {
		return nil, errBadCheckpoint
	}
	lines = lines[:len(lines)-1]
	if lines[0] != "0" {
		return nil, fmt.Errorf("%w: version %q", errBadCheckpoint, lines[0])
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("%w: count %q for %d entries", errBadCheckpoint, lines[1], len(lines)-2)
	}
	out := make([][2]int64, 0, n)
	for _, ln := range lines[2:] {
		fs := strings.Split(ln, " ")
		if len(fs) != fields {
			return nil, fmt.Errorf("%w: line %q", errBadCheckpoint, ln)
		}
		var e [2]int64
		for i, f := range fs {
			if e[i], err = strconv.ParseInt(f, 10, 64); err != nil {
				return nil, fmt.Errorf("%w: line %q", errBadCheckpoint, ln)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

func writeOffsetCheckpoint(fs vfs.FS, name string, off int64) error {
	return replaceFile(fs, name, encodeCheckpoint([][2]int64{{off}}, 1))
}

// keepOffsetCheckpoint is writeOffsetCheckpoint through keepOrReplaceFile.
func keepOffsetCheckpoint(fs vfs.FS, name string, off int64) error {
	return keepOrReplaceFile(fs, name, encodeCheckpoint([][2]int64{{off}}, 1), false)
}

// readOffsetCheckpoint returns the offset in name; ok false if the file is
// missing; an error if it is malformed.
func readOffsetCheckpoint(fs vfs.FS, name string) (off int64, ok bool, err error) {
	b, err := vfs.ReadFile(fs, name)
	if errors.Is(err, os.ErrNotExist) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, err
	}
	es, err := decodeCheckpoint(b, 1)
	if err == nil && (len(es) != 1 || es[0][0] < 0) {
		err = errBadCheckpoint
	}
	if err != nil {
		return -1, false, &CorruptionError{Segment: filepath.Base(name), Err: err}
	}
	return es[0][0], true, nil
}

// Producer snapshot layout: version byte (1), int64 offset, uint32 CRC-32C of
// the data, the data.
const producerSnapshotVersion = 1

func encodeProducerSnapshot(offset int64, data []byte) []byte {
	b := make([]byte, 13, 13+len(data))
	b[0] = producerSnapshotVersion
	binary.BigEndian.PutUint64(b[1:], uint64(offset))
	binary.BigEndian.PutUint32(b[9:], crc32.Checksum(data, castagnoli))
	return append(b, data...)
}

func decodeProducerSnapshot(b []byte) (int64, []byte, error) {
	if len(b) < 13 || b[0] != producerSnapshotVersion {
		return -1, nil, errors.New("bad producer snapshot header")
	}
	off := int64(binary.BigEndian.Uint64(b[1:]))
	data := b[13:]
	if c := crc32.Checksum(data, castagnoli); c != binary.BigEndian.Uint32(b[9:]) || off < 0 {
		return -1, nil, errors.New("producer snapshot crc mismatch")
	}
	return off, data, nil
}
