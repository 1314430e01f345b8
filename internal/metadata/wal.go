package metadata

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/berthmq/berth/internal/vfs"
)

// WAL layout (docs/format/metadata.md): a 12-byte header (8-byte magic,
// uint32 version) and then frames
//
//	uint32 length   (little endian) of type + payload
//	uint32 crc32c   (Castagnoli, little endian) of type + payload
//	uint8  type     1 = raftpb.Entry, 2 = raftpb.HardState
//	payload         the protobuf-marshalled message
//
// Frames are only appended. Snapshots rewrite the whole file (tmp, fsync,
// rename, fsync dir) with the HardState and the entries still in the log.
const (
	walName      = "metadata.wal"
	walMagic     = "BERTHWAL"
	walVersion   = 1
	walHeaderLen = 12
	frameHdrLen  = 8
	// maxFrameLen bounds one frame; a larger length field is corruption.
	maxFrameLen = 64 << 20

	frameEntry     = 1
	frameHardState = 2
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// walRecord is one decoded frame: exactly one field is set.
type walRecord struct {
	entry *pb.Entry
	hs    *pb.HardState
}

func walHeader() []byte {
	b := make([]byte, walHeaderLen)
	copy(b, walMagic)
	binary.LittleEndian.PutUint32(b[8:], walVersion)
	return b
}

// appendFrame appends the frame of msg to b.
func appendFrame(b []byte, typ byte, msg proto.Message) ([]byte, error) {
	start := len(b)
	b = append(b, make([]byte, frameHdrLen)...)
	b = append(b, typ)
	b, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(b, msg)
	if err != nil {
		return b[:start], err
	}
	body := b[start+frameHdrLen:]
	if len(body) > maxFrameLen {
		return b[:start], fmt.Errorf("metadata: WAL frame of %d bytes exceeds %d", len(body), maxFrameLen)
	}
	binary.LittleEndian.PutUint32(b[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(body, crcTable))
	return b, nil
}

// readWAL decodes a whole WAL file. It returns the records of the longest
// valid prefix and that prefix's length. A bad header is an error (the file
// is not ours or is damaged at the start: nothing to salvage). A bad frame
// ends the prefix and is reported as a *CorruptionError at its offset; the
// caller truncates there (a torn tail after a crash). It never panics.
func readWAL(b []byte) (recs []walRecord, valid int64, err error) {
	if len(b) < walHeaderLen || string(b[:8]) != walMagic {
		return nil, 0, fmt.Errorf("%w: bad WAL header", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != walVersion {
		return nil, 0, fmt.Errorf("%w: WAL version %d, want %d", ErrCorrupt, v, walVersion)
	}
	off := int64(walHeaderLen)
	for off < int64(len(b)) {
		rec, n, reason := readFrame(b[off:])
		if reason != "" {
			return recs, off, &CorruptionError{Offset: off, Reason: reason}
		}
		recs = append(recs, rec)
		off += n
	}
	return recs, off, nil
}

// readFrame decodes the frame at the start of b and returns its length,
// or a reason why it is bad.
func readFrame(b []byte) (walRecord, int64, string) {
	if len(b) < frameHdrLen {
		return walRecord{}, 0, "short frame header"
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 || n > maxFrameLen {
		return walRecord{}, 0, fmt.Sprintf("frame length %d out of range", n)
	}
	if uint64(len(b)-frameHdrLen) < uint64(n) {
		return walRecord{}, 0, "short frame"
	}
	body := b[frameHdrLen : frameHdrLen+int(n)]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return walRecord{}, 0, "checksum mismatch"
	}
	var rec walRecord
	var msg proto.Message
	switch body[0] {
	case frameEntry:
		rec.entry = &pb.Entry{}
		msg = rec.entry
	case frameHardState:
		rec.hs = &pb.HardState{}
		msg = rec.hs
	default:
		return walRecord{}, 0, fmt.Sprintf("unknown frame type %d", body[0])
	}
	if err := proto.Unmarshal(body[1:], msg); err != nil {
		return walRecord{}, 0, "undecodable payload: " + err.Error()
	}
	return rec, frameHdrLen + int64(n), ""
}

// wal appends frames to the WAL file. Owned by the Ready loop (or by Open
// and Close when the loop is not running).
type wal struct {
	fs   vfs.FS // for rewrites; appends go to f
	dir  string
	f    vfs.File
	size int64 // where the next frame goes: appends write at it (pwrite)
	buf  []byte
}

func (w *wal) path() string { return filepath.Join(w.dir, walName) }

// openWAL opens the WAL for appending at size (the valid prefix length,
// after truncation by the caller).
func openWAL(fs vfs.FS, dir string, size int64) (*wal, error) {
	w := &wal{fs: fs, dir: dir}
	f, err := fs.OpenFile(w.path(), os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	w.f, w.size = f, size
	return w, nil
}

// append writes entries and then hs (nil: none) in one write, and fsyncs
// when sync is set.
func (w *wal) append(ents []*pb.Entry, hs *pb.HardState, sync bool) error {
	b := w.buf[:0]
	var err error
	for _, e := range ents {
		if b, err = appendFrame(b, frameEntry, e); err != nil {
			return err
		}
	}
	if hs != nil {
		if b, err = appendFrame(b, frameHardState, hs); err != nil {
			return err
		}
	}
	w.buf = b
	if len(b) == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(b, w.size); err != nil {
		return fmt.Errorf("metadata: WAL write: %w", err)
	}
	w.size += int64(len(b))
	if sync {
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("metadata: WAL fsync: %w", err)
		}
	}
	return nil
}

// rewrite replaces the WAL with one holding hs and ents, atomically, and
// reopens it for appending.
func (w *wal) rewrite(hs *pb.HardState, ents []*pb.Entry) error {
	b := walHeader()
	var err error
	if hs != nil {
		if b, err = appendFrame(b, frameHardState, hs); err != nil {
			return err
		}
	}
	for _, e := range ents {
		if b, err = appendFrame(b, frameEntry, e); err != nil {
			return err
		}
	}
	if err := replaceFile(w.fs, w.path(), b); err != nil {
		return err
	}
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	nw, err := openWAL(w.fs, w.dir, int64(len(b)))
	if err != nil {
		return err
	}
	w.f, w.size = nw.f, nw.size
	return nil
}

func (w *wal) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}

// replaceFile replaces path with b durably (vfs.WriteFileAtomic): a crash
// leaves the old or the new file, never a mix.
func replaceFile(fs vfs.FS, path string, b []byte) error {
	if err := vfs.WriteFileAtomic(fs, path, b); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	return nil
}
