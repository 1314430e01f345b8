package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/berthmq/berth/internal/batch"
)

// cleanCodecs decompresses and recompresses the record sections of batches
// the cleaner rewrites, reusing its coders. Not safe for concurrent use:
// each Compact call takes one from cleanCodecsPool, as coders (a zstd
// encoder's tables above all) are costly to build.
type cleanCodecs struct {
	dec batch.Scratch // decompression, bounded as for produced batches
	gzw *gzip.Writer
	lzw *lz4.Writer
	ze  *zstd.Encoder
	out bytes.Buffer // gzip and lz4 output
	buf []byte       // snappy and zstd output
}

// xerialMagic starts snappy data framed the way the Java client writes it.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// xerialHeader is the magic, then version and minimum compatible version
// (both 1; the Java reader rejects a lower version).
var xerialHeader = append(append([]byte(nil), xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)

// xerialBlock is the block size of the Java client's snappy stream.
const xerialBlock = 32 << 10

var errCodec = errors.New("unsupported compression codec")

// decompress returns the records of a compressed batch, valid until the
// next call; dst is unused (the batch package's bounded decoders, shared
// with produce validation, own the buffer).
func (c *cleanCodecs) decompress(codec int, src, _ []byte) ([]byte, error) {
	out, err := c.dec.Decompress(codec, src)
	if errors.Is(err, batch.ErrUnsupportedCodec) {
		return nil, fmt.Errorf("%w %d", errCodec, codec)
	}
	return out, err
}

// growLen extends dst by n bytes of unspecified content.
func growLen(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		nd := make([]byte, len(dst), len(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	return dst[:len(dst)+n]
}

// compress compresses records with codec and returns the result, valid
// until the next call. xerial selects the Java framing for snappy, so a
// rewritten batch keeps the framing its producer chose.
func (c *cleanCodecs) compress(codec int, xerial bool, records []byte) ([]byte, error) {
	c.out.Reset()
	switch codec {
	case batch.CodecGzip:
		if c.gzw == nil {
			w, err := gzip.NewWriterLevel(&c.out, gzip.DefaultCompression)
			if err != nil {
				return nil, err
			}
			c.gzw = w
		} else {
			c.gzw.Reset(&c.out)
		}
		if _, err := c.gzw.Write(records); err != nil {
			return nil, err
		}
		if err := c.gzw.Close(); err != nil {
			return nil, err
		}
		return c.out.Bytes(), nil
	case batch.CodecSnappy:
		if !xerial {
			n := snappy.MaxEncodedLen(len(records))
			if n < 0 {
				return nil, errors.New("snappy: records too large")
			}
			c.buf = growLen(c.buf[:0], n)
			return snappy.Encode(c.buf, records), nil
		}
		b := append(c.buf[:0], xerialHeader...)
		for p := records; len(p) > 0; {
			n := min(len(p), xerialBlock)
			at := len(b)
			b = append(b, 0, 0, 0, 0)
			b = growLen(b, snappy.MaxEncodedLen(n))
			block := snappy.Encode(b[at+4:], p[:n])
			binary.BigEndian.PutUint32(b[at:], uint32(len(block)))
			b = b[:at+4+len(block)]
			p = p[n:]
		}
		c.buf = b
		return b, nil
	case batch.CodecLZ4:
		if c.lzw == nil {
			c.lzw = lz4.NewWriter(&c.out)
			// 64 KiB blocks, as the Java client writes: every reader
			// supports them and the coder stays small.
			if err := c.lzw.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
				return nil, err
			}
		} else {
			c.lzw.Reset(&c.out)
		}
		if _, err := c.lzw.Write(records); err != nil {
			return nil, err
		}
		if err := c.lzw.Close(); err != nil {
			return nil, err
		}
		return c.out.Bytes(), nil
	case batch.CodecZstd:
		if c.ze == nil {
			e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
			if err != nil {
				return nil, err
			}
			c.ze = e
		}
		c.buf = c.ze.EncodeAll(records, c.buf[:0])
		return c.buf, nil
	}
	return nil, fmt.Errorf("%w %d", errCodec, codec)
}

// The coders run without goroutines of their own (concurrency 1, whole
// buffers), so a pooled cleanCodecs the GC drops needs no Close.
var cleanCodecsPool = sync.Pool{New: func() any { return new(cleanCodecs) }}

func getCleanCodecs() *cleanCodecs { return cleanCodecsPool.Get().(*cleanCodecs) }

func putCleanCodecs(c *cleanCodecs) {
	if cap(c.buf) > 8<<20 {
		c.buf = nil
	}
	if c.out.Cap() > 8<<20 {
		c.out = bytes.Buffer{}
	}
	cleanCodecsPool.Put(c)
}
