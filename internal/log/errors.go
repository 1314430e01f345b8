package log

import (
	"errors"
	"fmt"
)

// Package sentinels. Callers test them with errors.Is; the broker maps them to
// Kafka error codes in one table at its edge.
var (
	// ErrOffsetOutOfRange: a read below the log start offset or above the
	// log end offset (OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrDiskFull wraps a write that failed with ENOSPC or EDQUOT
	// (KAFKA_STORAGE_ERROR). The log keeps working once space returns.
	ErrDiskFull = errors.New("log: disk full")
	// ErrClosed: the log was closed or deleted.
	ErrClosed = errors.New("log: closed")
	// ErrCorrupt marks data on disk that failed validation. Returned wrapped
	// in a *CorruptionError.
	ErrCorrupt = errors.New("log: corrupt data")
	// ErrInvalidBatch: bytes handed to the log (Append, ParseBatchHeader)
	// are not well-formed v2 record batches (CORRUPT_MESSAGE).
	ErrInvalidBatch = errors.New("log: invalid record batch")
	// ErrOffsetOrder: AppendWithOffsets got batches whose offsets do not
	// increase past the log end offset.
	ErrOffsetOrder = errors.New("log: offsets not increasing")
	// ErrFailed: an fsync failed. The page cache may have dropped dirty
	// data, so the log refuses further writes and syncs; reopen it to
	// recover from what is on disk (the fsyncgate lesson).
	ErrFailed = errors.New("log: failed after fsync error, reopen to recover")
)

// CorruptionError locates corrupt data: the segment file and the byte position
// in it where the first bad batch starts. Recovery truncates the segment there.
type CorruptionError struct {
	Segment string // file name (base name of the .log or index file)
	Offset  int64  // byte position in the file
	Err     error  // what was wrong
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("log: corrupt data in %s at position %d: %v", e.Segment, e.Offset, e.Err)
}

// Unwrap returns ErrCorrupt and the cause, so errors.Is(err, ErrCorrupt) holds.
func (e *CorruptionError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }
