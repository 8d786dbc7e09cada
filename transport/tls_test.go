package transport

import (
	"crypto/tls"
	"math"
	"net"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/devpki"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/hashicorp/raft"
)

// testCA returns a fresh CA and a function issuing node TLS material from it.
func testCA(t testing.TB) func(id string) *tlsconf.Material {
	t.Helper()
	ca, err := devpki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	return func(id string) *tlsconf.Material {
		m, err := ca.NodeMaterial(id)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// withTLS configures a Mux for mutual TLS with m.
func withTLS(m *tlsconf.Material) func(*MuxConfig) {
	return func(c *MuxConfig) { c.ServerTLS, c.ClientTLS = m.PeerServer(), m.PeerClient() }
}

// rawRequestVote is what a non-member sends to attack group "meta" in
// plaintext: the connection header, then raft's RequestVote RPC type byte
// and the start of its msgpack body.
var rawRequestVote = append(appendHeader(nil, "meta"), 1, 0x86)

func TestTransport_TLSMembersTalkAndGroupsElect(t *testing.T) {
	ips, _ := nodeIPs(t)
	issue := testCA(t)
	c := startClusterMux(t, ips, 0, func(i int, cfg *MuxConfig) { withTLS(issue(string(rune('a' + i))))(cfg) }, "meta", "p1")
	c.apply("meta", 10)
	c.apply("p1", 10)
	c.converge("p1", 10)
	for _, n := range c.nodes {
		if s := n.mux.Stats(); s.TLSRefused != 0 {
			t.Errorf("node %s refused members: %+v", n.id, s)
		}
	}
}

func TestTransport_TLSRefusesNonMembersBeforeAnyRaftByte(t *testing.T) {
	issue := testCA(t)
	m := newTestMux(t, "127.0.0.1", withTLS(issue("n1")))
	l := mustGroup(t, m, "meta")
	accepted := acceptAsync(l)

	// A plaintext dialer sending a RequestVote.
	plain, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.Write(rawRequestVote)
	expectClosed(t, plain)

	// A TLS dialer with a node certificate of another CA.
	stranger := testCA(t)("n1")
	tc, err := tls.Dial("tcp", m.Addr().String(), stranger.PeerClient())
	if err == nil {
		// Under TLS 1.3 the refusal of the client certificate arrives
		// after the client's side of the handshake.
		tc.Write(rawRequestVote)
		expectClosed(t, tc)
		tc.Close()
	}

	// A member dialing from another Mux of the same CA gets through.
	member := newTestMux(t, "127.0.0.1", withTLS(issue("n2")))
	ml := mustGroup(t, member, "meta")
	d, err := ml.Dial(raftAddr(l), time.Second)
	if err != nil {
		t.Fatalf("member dial: %v", err)
	}
	defer d.Close()
	roundTrip(t, d, acceptOne(t, accepted), "hello")

	// The server counts a refused handshake after its client may already
	// have seen the connection close.
	testwait.Until(t, waitTimeout, "2 TLS refusals and the member accepted", func() bool {
		s := m.Stats()
		return s.TLSRefused == 2 && s.Rejected == 2 && s.Accepted == 1
	})
}

func TestTransport_MaxTermRequestVoteFromOutsiderNoLongerLands(t *testing.T) {
	ips, _ := nodeIPs(t)
	issue := testCA(t)
	c := startClusterMux(t, ips, 0, func(i int, cfg *MuxConfig) { withTLS(issue(string(rune('a' + i))))(cfg) }, "meta")
	lead := c.leader("meta")
	term := lead.r.CurrentTerm()

	// The outsider has a raft transport with a certificate of its own CA.
	outsider := newTestMux(t, "127.0.0.1", withTLS(testCA(t)("x")))
	trans := NewTransport(mustGroup(t, outsider, "meta"), TransportConfig{Timeout: time.Second, Logger: testLogger()})
	defer trans.Close()
	for _, n := range c.nodes {
		var resp raft.RequestVoteResponse
		req := &raft.RequestVoteRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(n.id), Addr: []byte(n.mux.Addr().String())},
			Term:      math.MaxUint64, LastLogIndex: math.MaxUint64, LastLogTerm: math.MaxUint64, LeadershipTransfer: true,
		}
		if err := trans.RequestVote(n.id, raft.ServerAddress(n.mux.Addr().String()), req, &resp); err == nil {
			t.Fatalf("node %s answered the outsider's RequestVote (granted %v)", n.id, resp.Granted)
		}
	}
	c.apply("meta", 5)
	for _, n := range c.nodes {
		if got := n.replicas["meta"].r.CurrentTerm(); got > term+2 {
			t.Errorf("node %s: term %d after the attack, was %d", n.id, got, term)
		}
		// The server counts a refused handshake after its client may
		// already have seen the connection close.
		mux := n.mux
		testwait.Until(t, waitTimeout, "node "+string(n.id)+" to count the outsider refused", func() bool { return mux.Stats().TLSRefused > 0 })
	}
}

func TestTransport_TLSConfigMustBeMutual(t *testing.T) {
	m := testCA(t)("n1")
	cfg := DefaultMuxConfig("127.0.0.1:0")
	cfg.ServerTLS = m.PeerServer()
	if err := cfg.Validate(); err == nil {
		t.Fatal("ServerTLS without ClientTLS was accepted")
	}
	cfg.ClientTLS = m.PeerClient()
	cfg.ServerTLS = m.Server() // verifies client certificates only if given
	if err := cfg.Validate(); err == nil {
		t.Fatal("a server config that does not require client certificates was accepted")
	}
}
