package log

import "errors"

var errTODO = errors.New("log: not implemented yet")

// Log is one partition's log: a directory of segments.
type Log struct{ dir string }

// AppendResult describes an append.
type AppendResult struct {
	FirstOffset, LastOffset, LogEndOffset int64
	MaxTimestamp                          int64
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	BaseOffset, NextOffset, Size int64
	MaxTimestamp                 int64
}

func Open(dir string, cfg Config, opts Options) (*Log, error) { return nil, errTODO }
func (l *Log) SetConfig(cfg Config)                           {}
func (l *Log) Dir() string                                    { return l.dir }
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendResult, error) {
	return AppendResult{}, errTODO
}
func (l *Log) AppendWithOffsets(batches []byte) (AppendResult, error) { return AppendResult{}, errTODO }
func (l *Log) Sync() (int64, error)                                   { return 0, errTODO }
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64, minOne bool) ([]byte, error) {
	return nil, errTODO
}
func (l *Log) LogStartOffset() int64             { return 0 }
func (l *Log) LogEndOffset() int64               { return 0 }
func (l *Log) SetLogStartOffset(off int64) error { return errTODO }
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool, err error) {
	return 0, 0, false, errTODO
}
func (l *Log) MaxTimestamp() (ts int64, offset int64)                     { return -1, -1 }
func (l *Log) Truncate(offset int64) error                                { return errTODO }
func (l *Log) ApplyRetention() (segments int, bytes int64, err error)     { return 0, 0, errTODO }
func (l *Log) Size() int64                                                { return 0 }
func (l *Log) Segments() []SegmentInfo                                    { return nil }
func (l *Log) ScanBatches(from int64, fn func(h BatchHeader) error) error { return errTODO }
func (l *Log) EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64) {
	return -1, -1
}
func (l *Log) LatestEpoch() int32                                   { return -1 }
func (l *Log) SaveProducerSnapshot(offset int64, data []byte) error { return errTODO }
func (l *Log) LoadProducerSnapshot() (offset int64, data []byte, err error) {
	return -1, nil, errTODO
}
func (l *Log) Close() error  { return errTODO }
func (l *Log) Delete() error { return errTODO }
