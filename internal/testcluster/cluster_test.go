package testcluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/berthmq/berth/internal/poll"
)

// handshake builds the fixed part of the Raft transport's handshake.
func handshake(from, to int32) []byte {
	b := append([]byte{}, handshakeMagic...)
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint64(b, uint64(from)+1)
	b = binary.LittleEndian.AppendUint64(b, uint64(to)+1)
	return b
}

// The proxy forwards a connection after its handshake, closes the
// connections of a node when it is cut (to it and from it, not others),
// refuses new ones while cut, and lets them through again after heal.
func TestQuorumProxyCutsBothDirections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // an echo server standing in for node 2's controller listener
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go io.Copy(c, c)
		}
	}()
	cut := map[int32]bool{}
	var mu = make(chan struct{}, 1)
	isCut := func(id int32) bool { mu <- struct{}{}; defer func() { <-mu }(); return cut[id] }
	setCut := func(id int32, v bool) { mu <- struct{}{}; cut[id] = v; <-mu }
	px, err := newQuorumProxy(2, ln.Addr().String(), isCut)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()

	dial := func(from int32) net.Conn {
		c, err := net.Dial("tcp", px.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(handshake(from, 2)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	alive := func(c net.Conn) error {
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		b := make([]byte, 1)
		_, err := io.ReadFull(c, b)
		return err
	}
	// The echo returns the handshake first.
	drain := func(c net.Conn) {
		if _, err := io.ReadFull(c, make([]byte, handshakeFixed)); err != nil {
			t.Fatalf("handshake not forwarded: %v", err)
		}
	}
	c1, c3 := dial(1), dial(3)
	drain(c1)
	drain(c3)
	if alive(c1) != nil || alive(c3) != nil {
		t.Fatal("connections not forwarded")
	}
	setCut(1, true)
	px.sever(1)
	if err := alive(c1); err == nil {
		t.Fatal("connection from the cut node survived")
	}
	if err := alive(c3); err != nil {
		t.Fatalf("connection from another node was cut: %v", err)
	}
	if err := alive(dial(1)); err == nil {
		t.Fatal("new connection from the cut node let through")
	}
	setCut(2, true)
	px.sever(2)
	if err := alive(c3); err == nil {
		t.Fatal("connection to the cut node survived")
	}
	setCut(1, false)
	setCut(2, false)
	c := dial(1)
	drain(c)
	if err := alive(c); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}

// A three-process cluster elects a controller; cutting it off the quorum
// makes the others elect another, and after heal all three agree again;
// a running node restarted comes back over its data.
func TestClusterCutController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three berth processes")
	}
	c := StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	controllerSeenBy := func(id int32) (int32, error) {
		resp, err := DirectRequest(ctx, c.Direct(t, id), kmsg.NewPtrMetadataRequest())
		if err != nil {
			return -1, err
		}
		return resp.(*kmsg.MetadataResponse).ControllerID, nil
	}
	var ctrl int32
	poll.Until(t, 20*time.Second, func() error {
		var err error
		ctrl, err = controllerSeenBy(1)
		if err == nil && ctrl < 1 {
			err = fmt.Errorf("no controller")
		}
		return err
	})
	c.Cut(ctrl)
	other := ctrl%3 + 1
	poll.Until(t, 20*time.Second, func() error {
		got, err := controllerSeenBy(other)
		if err == nil && (got == ctrl || got < 1) {
			err = fmt.Errorf("node %d still sees controller %d", other, got)
		}
		return err
	})
	c.Heal(ctrl)
	adm := kadm.NewClient(Client(t, c.Addrs()[0]))
	resp, err := adm.CreateTopic(ctx, 1, 3, nil, "after-heal")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}

	// Restart stops a running node first, then starts it over its data.
	c.Restart(other)
	poll.Until(t, 20*time.Second, func() error {
		resp, err := DirectRequest(ctx, c.Direct(t, other), kmsg.NewPtrMetadataRequest())
		if err != nil {
			return err
		}
		for _, tp := range resp.(*kmsg.MetadataResponse).Topics {
			if tp.Topic != nil && *tp.Topic == "after-heal" {
				return nil
			}
		}
		return fmt.Errorf("node %d does not know topic after-heal after its restart", other)
	})
}
