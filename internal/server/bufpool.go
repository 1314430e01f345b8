package server

import (
	"math/bits"
	"sync"
)

// Buffers for large transient byte slices (Fetch reads), in power-of-two
// size classes from 4 KiB to 64 MiB, shared by all connections. A pooled
// buffer is not zeroed: the caller overwrites it whole.
const (
	minBufShift = 12
	maxBufShift = 26
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minBufShift
}

// GetBuf returns a slice of length n, from the pool when n is at most 64 MiB.
func GetBuf(n int) []byte {
	c := bufClass(n)
	if c >= len(bufPools) {
		return make([]byte, n)
	}
	if p, ok := bufPools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+minBufShift))
}

// PutBuf returns a slice from GetBuf to the pool.
func PutBuf(b []byte) {
	c := cap(b)
	if c < 1<<minBufShift || c&(c-1) != 0 {
		return
	}
	cl := bufClass(c)
	if cl >= len(bufPools) {
		return
	}
	b = b[:0]
	bufPools[cl].Put(&b)
}

// AfterEncode registers fn to run once the response of the Reply now
// running has been encoded, so buffers it references can be reused. Call
// it only from inside a Reply (it runs on the connection's write loop).
func (c *Conn) AfterEncode(fn func()) { c.afterEncode = append(c.afterEncode, fn) }
