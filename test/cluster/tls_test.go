package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"math"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/devpki"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/transport"
	"github.com/hashicorp/raft"
)

// TestCluster_TLSKeepsOutsiders runs a TLS cluster end to end and attacks
// it as a process without the cluster certificate would: a RequestVote
// with the maximum term on the meta group and on a partition group (the
// attack that left the cluster leaderless for good over plaintext), a
// plaintext raft header, clients without the CA and plain HTTP. None gets
// through, and the cluster keeps serving.
func TestCluster_TLSKeepsOutsiders(t *testing.T) {
	c := startCluster(t, options{})
	cl := c.dial("tls")
	c.createQueue(cl, "secure")
	q := cl.Queue("secure")
	ctx := opContext(t)
	if _, err := q.Send(ctx, client.Message{Body: []byte("before")}); err != nil {
		t.Fatalf("send over TLS: %v", err)
	}
	var reps []jsonview.Replica
	if err := c.getJSON(0, "/v1/replicas", &reps); err != nil || len(reps) == 0 {
		t.Fatalf("replicas of n1: %v %v", reps, err)
	}
	for _, group := range []string{"meta", reps[0].Group} {
		attackRaft(t, c, group)
	}
	for i := range c.members {
		conn, err := net.Dial("tcp", c.members[i].n.RaftAddr())
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("FRYR\x01\x04meta\x01\x86"))
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: plaintext raft connection answered or kept open: %v", c.members[i].cfg.ID, err)
		}
		conn.Close()
	}

	// The cluster still has its leaders and serves.
	c.createQueue(cl, "after-attack")
	if _, err := q.Send(ctx, client.Message{Body: []byte("after")}); err != nil {
		t.Fatalf("send after the attack: %v", err)
	}
	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 2, Wait: 5 * time.Second})
	if err != nil || len(ds) == 0 {
		t.Fatalf("receive after the attack: %d, %v", len(ds), err)
	}

	short, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	seeds := []string{c.members[0].cfg.ClientAddr}
	_, err = client.Dial(short, seeds, client.WithTLS(tlsconf.ClientWithPool(x509.NewCertPool())))
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("client without the CA: %v, want an unknown authority error", err)
	}
	if _, err := client.Dial(short, seeds, client.WithDialTimeout(time.Second)); err == nil {
		t.Error("a plaintext client connected")
	}
	plain := &http.Client{Timeout: 2 * time.Second}
	if resp, err := plain.Get("http://" + c.members[0].cfg.HTTPAddr + "/v1/queues"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP served the queue list")
		}
	}
}

// attackRaft sends every node a RequestVote for group with the maximum
// term, naming the node itself, from a raft transport whose certificate
// is of another CA. Every RPC must fail.
func attackRaft(t *testing.T, c *testCluster, group string) {
	t.Helper()
	other, err := devpki.NewCA("attacker")
	if err != nil {
		t.Fatal(err)
	}
	m, err := other.NodeMaterial("n1")
	if err != nil {
		t.Fatal(err)
	}
	mc := transport.DefaultMuxConfig("127.0.0.1:0")
	mc.ServerTLS, mc.ClientTLS = m.PeerServer(), m.PeerClient()
	mux, err := transport.NewMux(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	layer, err := mux.Group(group)
	if err != nil {
		t.Fatal(err)
	}
	trans := transport.NewTransport(layer, transport.TransportConfig{Timeout: 2 * time.Second})
	defer trans.Close()
	for _, mem := range c.members {
		addr := raft.ServerAddress(mem.n.RaftAddr())
		req := &raft.RequestVoteRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(mem.cfg.ID), Addr: []byte(addr)},
			Term:      math.MaxUint64, LastLogIndex: math.MaxUint64, LastLogTerm: math.MaxUint64, LeadershipTransfer: true,
		}
		var resp raft.RequestVoteResponse
		if err := trans.RequestVote(raft.ServerID(mem.cfg.ID), addr, req, &resp); err == nil {
			t.Errorf("%s answered a RequestVote for %s from another CA (granted %v)", mem.cfg.ID, group, resp.Granted)
		}
	}
}
