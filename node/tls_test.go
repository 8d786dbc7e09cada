package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/devpki"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/internal/tlsconf"
)

func TestConfig_TLSOrInsecureRequired(t *testing.T) {
	ca, err := devpki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ca.NodeMaterial("n1")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		mutate func(*Config)
		ok     bool
	}{
		"nothing":          {func(*Config) {}, false},
		"insecure":         {func(c *Config) { c.Insecure = true }, true},
		"memory":           {func(c *Config) { c.TLS = m }, true},
		"files":            {func(c *Config) { c.TLSCertFile, c.TLSKeyFile, c.TLSCAFile = "c", "k", "ca" }, true},
		"files incomplete": {func(c *Config) { c.TLSCertFile, c.TLSKeyFile = "c", "k" }, false},
		"files and memory": {func(c *Config) { c.TLSCertFile, c.TLSKeyFile, c.TLSCAFile, c.TLS = "c", "k", "ca", m }, false},
		"insecure and tls": {func(c *Config) { c.TLS, c.Insecure = m, true }, false},
	} {
		cfg := DefaultConfig("n1", t.TempDir(), "127.0.0.1", 0)
		c.mutate(&cfg)
		if err := cfg.Validate(); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("%s: Validate = %v, want ok %v", name, err, c.ok)
		}
	}
}

// startTLSNode starts a lone bootstrapped node with a certificate of a
// fresh CA and returns it with the CA pool.
func startTLSNode(t *testing.T) (*Node, *x509.CertPool) {
	t.Helper()
	ca, err := devpki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ca.NodeMaterial("lone")
	if err != nil {
		t.Fatal(err)
	}
	nd := startLoneNode(t, 1, func(c *Config) { c.Insecure, c.TLS = false, m })
	waitMetaLeader(t, nd)
	return nd, m.CAs
}

func TestNode_TLSOnTheClientPort(t *testing.T) {
	nd, pool := startTLSNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	c, err := client.Dial(ctx, []string{nd.ClientAddr()}, client.WithTLS(tlsconf.ClientWithPool(pool)))
	if err != nil {
		t.Fatalf("client trusting the CA: %v", err)
	}
	if err := c.CreateQueue(ctx, "orders"); err != nil {
		t.Fatalf("create over TLS: %v", err)
	}
	c.Close()

	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	_, err = client.Dial(short, []string{nd.ClientAddr()}, client.WithTLS(tlsconf.ClientWithPool(x509.NewCertPool())))
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("client without the CA: %v, want an unknown authority error", err)
	}
	if _, err := client.Dial(short, []string{nd.ClientAddr()}, client.WithDialTimeout(time.Second)); err == nil {
		t.Fatal("a plaintext client got through the TLS port")
	}
}

func TestNode_TLSOnTheHTTPPort(t *testing.T) {
	nd, pool := startTLSNode(t)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsconf.ClientWithPool(pool)}}
	resp, err := hc.Get("https://" + nd.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatalf("https: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("https /readyz: %s", resp.Status)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + nd.HTTPAddr() + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200 on the TLS admin port")
		}
	}
	untrusting := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}}
	if _, err := untrusting.Get("https://" + nd.HTTPAddr() + "/readyz"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("https without the CA: %v, want a certificate error", err)
	}
}

func TestNode_TLSRaftPortRefusesPlaintextRequestVote(t *testing.T) {
	nd, _ := startTLSNode(t)
	conn, err := net.Dial("tcp", nd.RaftAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The mux header naming the meta group, then a RequestVote type byte.
	conn.Write(append([]byte("FRYR\x01\x04meta"), 1, 0x86))
	if !waitClosed(conn, 10*time.Second) {
		t.Fatal("the raft port kept a plaintext connection open")
	}
	testwait.UntilNil(t, 10*time.Second, "the plaintext dialer counted as refused", func() error {
		if st := nd.mux.Stats(); st.TLSRefused == 0 {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
	if v := seriesValue(t, nd, "ferry_raft_connections_refused_total", "reason", "tls"); v != 1 {
		t.Fatalf("ferry_raft_connections_refused_total{reason=tls} = %v, want 1", v)
	}
	if v := seriesValue(t, nd, "ferry_raft_connections_refused_total", "reason", "busy"); v != 0 {
		t.Fatalf("ferry_raft_connections_refused_total{reason=busy} = %v, want 0", v)
	}
}

// seriesValue returns the value of the series of name whose label has
// value, from nd's registry; the test fails when there is none.
func seriesValue(t *testing.T, nd *Node, name, label, value string) float64 {
	t.Helper()
	families, err := nd.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return 0
}

// Under TLS the dashboard reaches the cluster through the node's own
// TLS client port and shows the queues.
func TestNode_DashboardOverTLS(t *testing.T) {
	nd, pool := startTLSNode(t)
	createQueueOnTLS(t, nd, pool, "tls-jobs")
	hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsconf.ClientWithPool(pool)}}
	testwait.Until(t, 15*time.Second, "queues page lists tls-jobs", func() bool {
		resp, err := hc.Get("https://" + nd.HTTPAddr() + "/queues")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `data-queue="tls-jobs"`) &&
			!strings.Contains(string(b), `class="error"`)
	})
}

func createQueueOnTLS(t *testing.T, nd *Node, pool *x509.CertPool, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, []string{nd.ClientAddr()}, client.WithTLS(tlsconf.ClientWithPool(pool)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateQueue(ctx, name); err != nil {
		t.Fatal(err)
	}
}
