package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// MaxDecompressed bounds what one batch may decompress to, so a small
// compressed batch cannot make the broker allocate without limit.
const MaxDecompressed = 256 << 20

// Scratch holds reusable buffers for decompression. It is not safe for
// concurrent use; use one per goroutine or take one from a pool with
// GetScratch/PutScratch.
type Scratch struct {
	buf  []byte
	zstd *zstd.Decoder
	gz   *gzip.Reader
	lz   *lz4.Reader
}

var scratchPool = sync.Pool{New: func() any { return new(Scratch) }}

// GetScratch takes a Scratch from a pool.
func GetScratch() *Scratch { return scratchPool.Get().(*Scratch) }

// PutScratch returns a Scratch to the pool; large buffers are dropped.
func PutScratch(s *Scratch) {
	if cap(s.buf) > 8<<20 {
		s.buf = nil
	}
	scratchPool.Put(s)
}

var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// Decompress returns the records section of a batch compressed with codec,
// valid until the next use of s. The output is bounded by MaxDecompressed.
// Errors wrap ErrUnsupportedCodec, ErrInvalidRecord (too large) or
// ErrCorrupt.
func (s *Scratch) Decompress(codec int, src []byte) ([]byte, error) {
	return s.decompress(codec, src)
}

func (s *Scratch) decompress(codec int, src []byte) ([]byte, error) {
	if s == nil {
		s = new(Scratch)
	}
	out, err := s.decode(codec, src)
	if err != nil {
		if errors.Is(err, ErrUnsupportedCodec) || errors.Is(err, ErrInvalidRecord) {
			return nil, err
		}
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, fmt.Errorf("%w: decompresses to more than %d bytes", ErrInvalidRecord, MaxDecompressed)
		}
		return nil, fmt.Errorf("%w: cannot decompress: %v", ErrCorrupt, err)
	}
	return out, nil
}

func (s *Scratch) decode(codec int, src []byte) ([]byte, error) {
	switch codec {
	case CodecGzip:
		if s.gz == nil {
			gz, err := gzip.NewReader(bytes.NewReader(src))
			if err != nil {
				return nil, err
			}
			s.gz = gz
		} else if err := s.gz.Reset(bytes.NewReader(src)); err != nil {
			return nil, err
		}
		return s.readAll(s.gz)
	case CodecSnappy:
		if bytes.HasPrefix(src, xerialMagic) {
			return s.xerial(src)
		}
		return s.snappyBlock(src, s.buf[:0])
	case CodecLZ4:
		if s.lz == nil {
			s.lz = lz4.NewReader(bytes.NewReader(src))
		} else {
			s.lz.Reset(bytes.NewReader(src))
		}
		return s.readAll(s.lz)
	case CodecZstd:
		if s.zstd == nil {
			d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxDecompressed))
			if err != nil {
				return nil, err
			}
			s.zstd = d
		}
		out, err := s.zstd.DecodeAll(src, s.buf[:0])
		if err != nil {
			return nil, err
		}
		s.buf = out
		return out, nil
	default:
		return nil, ErrUnsupportedCodec
	}
}

func (s *Scratch) readAll(r io.Reader) ([]byte, error) {
	buf := bytes.NewBuffer(s.buf[:0])
	n, err := buf.ReadFrom(io.LimitReader(r, MaxDecompressed+1))
	if err != nil {
		return nil, err
	}
	if n > MaxDecompressed {
		return nil, fmt.Errorf("%w: decompresses to more than %d bytes", ErrInvalidRecord, MaxDecompressed)
	}
	s.buf = buf.Bytes()
	return s.buf, nil
}

func (s *Scratch) snappyBlock(src, dst []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n > MaxDecompressed || len(dst)+n > MaxDecompressed {
		return nil, ErrInvalidRecord
	}
	if cap(dst)-len(dst) < n {
		nd := make([]byte, len(dst), len(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	out, err := s2.Decode(dst[len(dst):len(dst)+n], src)
	if err != nil {
		return nil, err
	}
	dst = dst[:len(dst)+len(out)]
	s.buf = dst
	return dst, nil
}

// xerial decodes the framing the Java client uses: an 8-byte magic, two
// int32 versions, then chunks of int32 length + snappy block.
func (s *Scratch) xerial(src []byte) ([]byte, error) {
	if len(src) < 16 {
		return nil, fmt.Errorf("short xerial header")
	}
	src = src[16:]
	dst := s.buf[:0]
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, fmt.Errorf("short xerial chunk")
		}
		n := int(binary.BigEndian.Uint32(src))
		src = src[4:]
		if n < 0 || n > len(src) {
			return nil, fmt.Errorf("xerial chunk overruns")
		}
		var err error
		if dst, err = s.snappyBlock(src[:n], dst); err != nil {
			return nil, err
		}
		src = src[n:]
	}
	return dst, nil
}
