package batch

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// seedBatches are valid batches of every codec, and a few damaged ones.
func seedBatches() [][]byte {
	var out [][]byte
	for _, c := range codecs {
		b := newSpec(seqRecords(3), c.codec, c.compress).build()
		out = append(out, b)
	}
	two := append(append([]byte(nil), out[0]...), out[len(out)-1]...)
	out = append(out, two, out[0][:HeaderSize], out[1][:len(out[1])-1])
	return out
}

// FuzzValidate: any bytes may arrive as produce data. Validate never
// panics, and when it accepts data the bytes are exactly the batches it
// reports: ParseHeader agrees with each returned header, the sizes add up,
// every CRC verifies (after any LogAppendTime restamp) and Records reads
// back as many records as the header counts, with offset deltas 0..n-1.
func FuzzValidate(f *testing.F) {
	for _, b := range seedBatches() {
		f.Add(b, false, false)
		f.Add(b, true, true)
	}
	scratch := new(Scratch)
	f.Fuzz(func(t *testing.T, data []byte, logAppendTime, seal bool) {
		if seal && len(data) >= HeaderSize {
			// Make data one batch with a valid length and CRC, so that
			// mutations get past the CRC to the records and codecs.
			binary.BigEndian.PutUint32(data[8:], uint32(len(data)-12))
			data[16] = 2
			fixCRC(data)
		}
		orig := append([]byte(nil), data...)
		lim := Limits{MaxBatchBytes: 1 << 20, LogAppendTime: logAppendTime, Now: now, BeforeMaxMs: 1 << 40, AfterMaxMs: 1 << 40}
		v, err := Validate(data, lim, scratch)
		if err != nil {
			return
		}
		if !logAppendTime && !bytes.Equal(data, orig) {
			t.Fatal("Validate changed a CreateTime batch")
		}
		records, off := 0, 0
		for i, want := range v.Batches {
			h, err := ParseHeader(data[off:])
			if err != nil {
				t.Fatalf("batch %d at %d: accepted, but ParseHeader: %v", i, off, err)
			}
			if h != want {
				t.Fatalf("batch %d: Validate %+v, ParseHeader %+v", i, want, h)
			}
			b := data[off : off+h.Size()]
			if crc32.Checksum(b[21:], crcTable) != h.CRC {
				t.Fatalf("batch %d: CRC does not verify after Validate", i)
			}
			if logAppendTime && (h.MaxTimestamp != now || h.Attributes&AttrLogAppendTime == 0) {
				t.Fatalf("batch %d not restamped: %+v", i, h)
			}
			if h.Control() || h.RecordCount < 1 || h.LastOffsetDelta != h.RecordCount-1 {
				t.Fatalf("batch %d accepted with %+v", i, h)
			}
			recs, rh, err := Records(b, scratch)
			if err != nil {
				t.Fatalf("batch %d: accepted, but Records: %v", i, err)
			}
			if rh != h || len(recs) != int(h.RecordCount) {
				t.Fatalf("batch %d: Records read %d records, header counts %d", i, len(recs), h.RecordCount)
			}
			for j, r := range recs {
				if r.OffsetDelta != int64(j) {
					t.Fatalf("batch %d record %d: offset delta %d", i, j, r.OffsetDelta)
				}
			}
			records += len(recs)
			off += h.Size()
		}
		if off != len(data) || records != v.Records {
			t.Fatalf("batches cover %d of %d bytes, %d of %d records", off, len(data), records, v.Records)
		}
	})
}

// FuzzRecords: the record reader (used on stored batches, which a
// follower or a recovered log may hand it) never panics, whatever the bytes.
func FuzzRecords(f *testing.F) {
	for _, b := range seedBatches() {
		f.Add(b)
	}
	scratch := new(Scratch)
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, h, err := Records(b, scratch)
		if err != nil {
			return
		}
		if h.Size() > len(b) || h.Magic != 2 {
			t.Fatalf("read %d records from a batch with header %+v in %d bytes", len(recs), h, len(b))
		}
	})
}

// FuzzControlType: a follower and recovery read control batches from the
// log and the wire. ControlType and ParseMarker never panic, they agree on
// the type of any batch both accept, and what BuildControl writes reads
// back as its type and coordinator epoch.
func FuzzControlType(f *testing.F) {
	f.Add(BuildControl(1, 0, ControlAbort, 0, now), int16(0), int32(0))
	f.Add(BuildControl(7, 3, ControlCommit, 9, now), int16(1), int32(-1))
	f.Add(seedBatches()[0], int16(5), int32(1<<31-1))
	f.Fuzz(func(t *testing.T, data []byte, typ int16, coordinatorEpoch int32) {
		ct, cterr := ControlType(data)
		if m, err := ParseMarker(data); err == nil && (cterr != nil || ct != m.Type) {
			t.Fatalf("ParseMarker read type %d, ControlType %d, %v", m.Type, ct, cterr)
		}
		b := BuildControl(int64(len(data)), int16(len(data)), typ, coordinatorEpoch, now)
		got, err := ControlType(b)
		if err != nil || got != typ {
			t.Fatalf("ControlType of BuildControl(type %d) = %d, %v", typ, got, err)
		}
		m, err := ParseMarker(b)
		if err != nil || m != (Marker{Type: typ, CoordinatorEpoch: coordinatorEpoch}) {
			t.Fatalf("ParseMarker of BuildControl(type %d, coordinator epoch %d) = %+v, %v", typ, coordinatorEpoch, m, err)
		}
	})
}
