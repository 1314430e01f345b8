package metadata

import (
	"encoding/json"
	"fmt"
)

// An EntryNormal's Data is one JSON object (docs/format/metadata.md):
//
//	{"v":1,"node":<proposer raft id>,"id":<proposal id>,"records":[<Record>...]}
//
// node and id only let the proposer find its waiting caller; apply ignores
// them. Empty Data (the entry a new leader appends) applies nothing.
const entryVersion = 1

// MaxEntryBytes bounds one proposal's encoded size.
const MaxEntryBytes = 8 << 20

type entryData struct {
	V       int      `json:"v"`
	Node    uint64   `json:"node,omitempty"`
	ID      uint64   `json:"id,omitempty"`
	Records []Record `json:"records"`
}

// EncodeEntry encodes a batch of records as a Raft entry's Data.
func EncodeEntry(node, id uint64, recs []Record) ([]byte, error) {
	for i := range recs {
		if _, err := recs[i].kind(); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: empty batch", ErrInvalidRecord)
	}
	b, err := json.Marshal(entryData{V: entryVersion, Node: node, ID: id, Records: recs})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	}
	if len(b) > MaxEntryBytes {
		return nil, fmt.Errorf("%w: batch of %d bytes exceeds %d", ErrInvalidRecord, len(b), MaxEntryBytes)
	}
	return b, nil
}

// decodeEntry parses EncodeEntry's output. A decoding failure is
// deterministic (same bytes on every replica), so apply turns it into an
// apply error for that entry.
func decodeEntry(b []byte) (entryData, error) {
	var d entryData
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%w: entry: %v", ErrInvalidRecord, err)
	}
	if d.V != entryVersion {
		return d, fmt.Errorf("%w: entry version %d, want %d", ErrInvalidRecord, d.V, entryVersion)
	}
	return d, nil
}
