package transport

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

func TestTransport_ConfigValidationNamesField(t *testing.T) {
	cases := []struct {
		name  string
		cfg   MuxConfig
		field string
	}{
		{"empty bind", MuxConfig{}, "MuxConfig.BindAddr"},
		{"bind without port", MuxConfig{BindAddr: "127.0.0.1"}, "MuxConfig.BindAddr"},
		{"bind bad port", MuxConfig{BindAddr: "127.0.0.1:70000"}, "MuxConfig.BindAddr"},
		{"all interfaces without advertise", MuxConfig{BindAddr: "0.0.0.0:7001"}, "MuxConfig.AdvertiseAddr"},
		{"empty host without advertise", MuxConfig{BindAddr: ":7001"}, "MuxConfig.AdvertiseAddr"},
		{"advertise host name", MuxConfig{BindAddr: "127.0.0.1:0", AdvertiseAddr: "node1:7001"}, "MuxConfig.AdvertiseAddr"},
		{"advertise unspecified", MuxConfig{BindAddr: "127.0.0.1:0", AdvertiseAddr: "0.0.0.0:7001"}, "MuxConfig.AdvertiseAddr"},
		{"advertise port 0", MuxConfig{BindAddr: "127.0.0.1:0", AdvertiseAddr: "127.0.0.1:0"}, "MuxConfig.AdvertiseAddr"},
		{"negative handshake", MuxConfig{BindAddr: "127.0.0.1:0", HandshakeTimeout: -time.Second}, "MuxConfig.HandshakeTimeout"},
		{"negative dialing", MuxConfig{BindAddr: "127.0.0.1:0", MaxDialing: -1}, "MuxConfig.MaxDialing"},
		{"negative handshakes", MuxConfig{BindAddr: "127.0.0.1:0", MaxHandshakes: -1}, "MuxConfig.MaxHandshakes"},
		{"negative handshakes per IP", MuxConfig{BindAddr: "127.0.0.1:0", MaxHandshakesPerIP: -1}, "MuxConfig.MaxHandshakesPerIP"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate() = %q, does not name %s", err, tc.field)
			}
			if _, err := NewMux(tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewMux() = %v, want ErrInvalidConfig", err)
			}
		})
	}
	valid := []MuxConfig{
		DefaultMuxConfig("127.0.0.1:0"),
		{BindAddr: "127.0.0.1:7001"},
		{BindAddr: "0.0.0.0:7001", AdvertiseAddr: "10.0.0.5:7001"},
		{BindAddr: "[::1]:0", AdvertiseAddr: "[::1]:7001"},
	}
	for _, cfg := range valid {
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", cfg, err)
		}
	}
}

func TestTransport_GroupIDValidation(t *testing.T) {
	good := []string{"meta", "p1", "orders/3", "q:orders:p12", strings.Repeat("x", MaxGroupIDLen)}
	for _, id := range good {
		if err := ValidateGroupID(id); err != nil {
			t.Errorf("ValidateGroupID(%q) = %v", id, err)
		}
	}
	bad := []string{"", "a b", "tab\t", "é", strings.Repeat("x", MaxGroupIDLen+1)}
	for _, id := range bad {
		if err := ValidateGroupID(id); !errors.Is(err, ErrInvalidGroupID) {
			t.Errorf("ValidateGroupID(%q) = %v, want ErrInvalidGroupID", id, err)
		}
	}
}

func TestTransport_HeaderRoundTrip(t *testing.T) {
	for _, id := range []string{"meta", "p1", strings.Repeat("z", MaxGroupIDLen)} {
		b := appendHeader(nil, id)
		r := bytes.NewReader(append(b, "raft bytes"...))
		got, err := readHeader(r)
		if err != nil || got.group != id || got.class != 0 {
			t.Fatalf("readHeader = %+v, %v; want %q", got, err, id)
		}
		if r.Len() != len("raft bytes") {
			t.Fatalf("readHeader consumed %d bytes past the header", len("raft bytes")-r.Len())
		}
	}
	bad := map[string][]byte{
		"short":       []byte("FRY"),
		"magic":       []byte("HTTP\x01\x04meta"),
		"version":     []byte("FRYR\x03\x04meta"),
		"class 0":     []byte("FRYR\x02\x00"),
		"class 9":     []byte("FRYR\x02\x09"),
		"empty id":    []byte("FRYR\x01\x00"),
		"truncated":   []byte("FRYR\x01\x09meta"),
		"unprintable": []byte("FRYR\x01\x04me\x00a"),
	}
	for class := byte(1); class < numClasses; class++ {
		got, err := readHeader(bytes.NewReader(appendSharedHeader(nil, class)))
		if err != nil || got.class != class || got.group != "" {
			t.Fatalf("readHeader(shared class %d) = %+v, %v", class, got, err)
		}
	}
	for name, b := range bad {
		if _, err := readHeader(bytes.NewReader(b)); !errors.Is(err, ErrBadHeader) {
			t.Errorf("%s: readHeader = %v, want ErrBadHeader", name, err)
		}
	}
}

func FuzzReadHeader(f *testing.F) {
	f.Add(appendHeader(nil, "meta"))
	f.Add([]byte("FRYR\x01\xffabc"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := readHeader(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrBadHeader) {
				t.Fatalf("error %v does not wrap ErrBadHeader", err)
			}
			return
		}
		want := appendHeader(nil, h.group)
		if h.class != 0 {
			want = appendSharedHeader(nil, h.class)
		}
		if !bytes.HasPrefix(b, want) {
			t.Fatalf("accepted %+v that is not the encoded prefix of %q", h, b)
		}
	})
}

func TestTransport_GroupRegistration(t *testing.T) {
	m := newTestMux(t, "127.0.0.1", nil)
	l := mustGroup(t, m, "p1")
	if _, err := m.Group("p1"); !errors.Is(err, ErrGroupExists) {
		t.Fatalf("second Group(p1) = %v, want ErrGroupExists", err)
	}
	if _, err := m.Group("bad id"); !errors.Is(err, ErrInvalidGroupID) {
		t.Fatalf("Group(bad id) = %v, want ErrInvalidGroupID", err)
	}
	if l.Addr().String() != m.Addr().String() || l.ID() != "p1" {
		t.Fatalf("Addr/ID = %s/%s, want %s/p1", l.Addr(), l.ID(), m.Addr())
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Accept(); !errors.Is(err, ErrGroupClosed) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v, want ErrGroupClosed wrapping net.ErrClosed", err)
	}
	if _, err := l.Dial(raftAddr(l), time.Second); !errors.Is(err, ErrGroupClosed) {
		t.Fatalf("Dial after Close = %v, want ErrGroupClosed", err)
	}
	again := mustGroup(t, m, "p1")
	if got := m.Stats().Groups; got != 1 {
		t.Fatalf("Stats().Groups = %d, want 1", got)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Mux.Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Mux.Close: %v", err)
	}
	if _, err := m.Group("meta"); !errors.Is(err, ErrMuxClosed) {
		t.Fatalf("Group after Mux.Close = %v, want ErrMuxClosed", err)
	}
	if _, err := again.Accept(); !errors.Is(err, ErrGroupClosed) {
		t.Fatalf("Accept after Mux.Close = %v, want ErrGroupClosed", err)
	}
	if _, err := again.Dial(raftAddr(again), time.Second); !errors.Is(err, ErrMuxClosed) {
		t.Fatalf("Dial after Mux.Close = %v, want ErrMuxClosed", err)
	}
	if s := m.Stats(); s.Groups != 0 {
		t.Fatalf("Stats after Mux.Close = %+v, want no groups", s)
	}
}

func TestTransport_AdvertiseAddr(t *testing.T) {
	m := newTestMux(t, "127.0.0.1", func(c *MuxConfig) { c.AdvertiseAddr = "127.0.0.1:65000" })
	l := mustGroup(t, m, "meta")
	if got := l.Addr().String(); got != "127.0.0.1:65000" {
		t.Fatalf("Addr() = %s, want the advertised 127.0.0.1:65000", got)
	}
	plain := newTestMux(t, "127.0.0.1", nil)
	if a := plain.Addr().(*net.TCPAddr); a.Port == 0 {
		t.Fatalf("Addr() = %s: port 0 was not resolved to the bound port", a)
	}
}

func TestTransport_DialBindsNodeIP(t *testing.T) {
	ips, distinct := nodeIPs(t)
	a := mustGroup(t, newTestMux(t, ips[0], nil), "meta")
	b := mustGroup(t, newTestMux(t, ips[1], nil), "meta")
	dialed, accepted := connPair(t, a, b)
	roundTrip(t, dialed, accepted, "append entries")
	roundTrip(t, accepted, dialed, "ok")
	remote := accepted.RemoteAddr().(*net.TCPAddr)
	local := dialed.LocalAddr().(*net.TCPAddr)
	if !remote.IP.Equal(local.IP) || remote.IP.String() != ips[0] {
		t.Fatalf("server saw the dialer as %s (dialer local %s), want IP %s", remote, local, ips[0])
	}
	if !distinct {
		t.Log("distinct loopback IPs unavailable: checked 127.0.0.1 only")
	}
}

func TestTransport_GroupCloseIsolated(t *testing.T) {
	client := newTestMux(t, "127.0.0.1", nil)
	server := newTestMux(t, "127.0.0.1", nil)
	cMeta, cP1 := mustGroup(t, client, "meta"), mustGroup(t, client, "p1")
	sMeta, sP1 := mustGroup(t, server, "meta"), mustGroup(t, server, "p1")

	metaDialed, metaAccepted := connPair(t, cMeta, sMeta)
	p1Dialed, p1Accepted := connPair(t, cP1, sP1)
	if s := server.Stats(); s.Groups != 2 || s.Accepted != 2 || s.Dialed != 0 {
		t.Fatalf("server Stats = %+v, want 2 groups, 2 accepted", s)
	}
	if s := client.Stats(); s.Dialed != 2 || s.Accepted != 0 {
		t.Fatalf("client Stats = %+v, want 2 dialed", s)
	}

	if err := sP1.Close(); err != nil {
		t.Fatalf("Close p1: %v", err)
	}
	expectClosed(t, p1Dialed)
	_ = p1Dialed.Close() // as raft does on a read error
	_ = p1Accepted.Close()
	roundTrip(t, metaDialed, metaAccepted, "still here")
	roundTrip(t, metaAccepted, metaDialed, "yes")
	if s := server.Stats(); s.Groups != 1 || s.Accepted != 1 {
		t.Fatalf("server Stats after closing p1 = %+v, want 1 group, 1 accepted", s)
	}

	// p1 can come back on the same Mux and port.
	sP1 = mustGroup(t, server, "p1")
	p1Dialed, p1Accepted = connPair(t, cP1, sP1)
	roundTrip(t, p1Dialed, p1Accepted, "again")

	// Closing a dialing group closes what it dialed.
	if err := cMeta.Close(); err != nil {
		t.Fatalf("Close client meta: %v", err)
	}
	expectClosed(t, metaAccepted)
	testwait.Until(t, waitTimeout, "client dialed count to drop to 1", func() bool { return client.Stats().Dialed == 1 })
}
