package server

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"net"
	"testing"
)

// BenchmarkLoopbackStream is the ceiling a TLS listener's consume
// throughput is read against (docs/benchmarks.md, TLS): one connection on
// loopback, a writer sending 256 KiB writes (as the broker writes a large
// Fetch response) and a reader draining them, over plain TCP and over TLS
// 1.3 (AES-128-GCM), both ends in this process on the same cores as a
// consumer and broker share them. No Kafka code runs: the ratio of the
// two is what TLS costs a byte stream on this machine.
func BenchmarkLoopbackStream(b *testing.B) {
	ca := newTestCA(b)
	certPEM, keyPEM := ca.issue(b, pkix.Name{CommonName: "bench"})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	srvTLS := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}
	cliTLS := &tls.Config{RootCAs: ca.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
	const chunk = 256 << 10
	for _, mode := range []string{"tcp", "tls"} {
		b.Run(mode, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			errc := make(chan error, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					errc <- err
					return
				}
				defer c.Close()
				if mode == "tls" {
					c = tls.Server(c, srvTLS)
				}
				buf := make([]byte, chunk)
				for i := 0; i < b.N; i++ {
					if _, err := c.Write(buf); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if mode == "tls" {
				c = tls.Client(c, cliTLS)
			}
			b.SetBytes(chunk)
			b.ResetTimer()
			if _, err := io.CopyN(io.Discard, c, int64(b.N)*chunk); err != nil {
				b.Fatal(err)
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}
