package tests

import (
	"bytes"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/berthmq/berth/internal/poll"
	"github.com/berthmq/berth/internal/testcluster"
)

// A three-node cluster whose controller (Raft) listeners and Kafka
// listeners are all SSL with required client certificates: the quorum
// forms over mutual TLS, followers replicate over TLS (acks=all with
// three in-sync replicas), and the controller port refuses a plain TCP
// client and a client whose certificate another CA signed, saying so in
// its log.
func TestTLSClusterMutual(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three berth processes")
	}
	ca := testcluster.NewCA(t, "berth-test-ca")
	node := ca.Issue(t, pkix.Name{CommonName: "berth-node", OrganizationalUnit: []string{"Brokers"}}, 100)
	client := ca.Issue(t, pkix.Name{CommonName: "app"}, 101)
	stranger := testcluster.NewCA(t, "stranger-ca").Issue(t, pkix.Name{CommonName: "berth-node"}, 102)

	c := testcluster.StartCluster(t, 3,
		"--override", "listener.security.protocol.map=PLAINTEXT:SSL,CONTROLLER:SSL",
		"--ssl.keystore.location", node.Keystore,
		"--ssl.truststore.location", ca.File,
		"--ssl.client.auth", "required",
		"--override", "http.ssl.keystore.location="+node.Keystore,
		"--override", "http.ssl.truststore.location="+ca.File,
		"--override", "http.auth=mtls",
	)
	pair, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{pair}}
	cl := testcluster.Client(t, c.Addrs()[0], kgo.SeedBrokers(c.Addrs()...), kgo.DialTLSConfig(tc),
		kgo.DefaultProduceTopic("tls-replicated"), kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctxT(t, 30*time.Second), 1, 3, nil, "tls-replicated"); err != nil {
		t.Fatal(err)
	}
	// Every replica joins the ISR: the followers fetch over TLS.
	poll.Until(t, 30*time.Second, func() error {
		md, err := adm.Metadata(ctxT(t, 10*time.Second), "tls-replicated")
		if err != nil {
			return err
		}
		p := md.Topics["tls-replicated"].Partitions[0]
		if len(p.ISR) != 3 {
			return fmt.Errorf("ISR %v, want 3 replicas", p.ISR)
		}
		return nil
	})
	for i := range 10 {
		produceSync(t, cl, &kgo.Record{Value: []byte("v" + strconv.Itoa(i))})
	}
	if recs := consumeN(t, c.Addrs()[0], "tls-replicated", 10, kgo.DialTLSConfig(tc)); string(recs[9].Value) != "v9" {
		t.Fatalf("record 9: %q", recs[9].Value)
	}

	// The schema registry over HTTPS with client certificates: a write
	// sent to any node is forwarded to the writer over TLS with the
	// node's certificate, on kept-alive connections.
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	for i := range 6 {
		id := c.IDs()[i%3]
		reg, err := sr.NewClient(sr.URLs("https://"+c.Node(id).HTTPAddr()), sr.HTTPClient(hc))
		if err != nil {
			t.Fatal(err)
		}
		subject := fmt.Sprintf("tls-%d-value", i)
		got, err := reg.CreateSchema(ctxT(t, 30*time.Second), subject, sr.Schema{Schema: `"string"`})
		if err != nil {
			t.Fatalf("register %s through node %d: %v", subject, id, err)
		}
		if _, err := reg.SchemaByID(ctxT(t, 10*time.Second), got.ID); err != nil {
			t.Fatalf("read back id %d on node %d: %v", got.ID, id, err)
		}
	}

	// The controller port (the node's own, behind the test's proxy).
	ctl := c.Node(1).ControllerAddr
	raw, err := net.DialTimeout("tcp", ctl, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	raw.Write(append([]byte("BERTHRFT"), make([]byte, 64)...))
	raw.SetReadDeadline(time.Now().Add(15 * time.Second))
	if n, _ := raw.Read(make([]byte, 16)); n > 0 {
		t.Fatal("a plain TCP client got an answer from the TLS controller listener")
	}
	raw.Close()
	bad, _ := tls.X509KeyPair(stranger.CertPEM, stranger.KeyPEM)
	if conn, err := tls.Dial("tcp", ctl, &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{bad}}); err == nil {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil {
			t.Fatal("a node with an untrusted certificate was served by the controller listener")
		}
		conn.Close()
	}
	poll.Until(t, 20*time.Second, func() error {
		b, _ := os.ReadFile(c.Node(1).LogFile)
		if n := bytes.Count(b, []byte("refused raft connection: TLS handshake failed")); n < 2 {
			return fmt.Errorf("%d refusals logged, want 2 (the plain client and the stranger)", n)
		}
		return nil
	})
}
