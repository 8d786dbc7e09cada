package tlsconf_test

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/devpki"
	"github.com/ferrymq/ferry/internal/tlsconf"
)

// handshake runs a TLS handshake between server and client configs over
// loopback TCP and returns the client's and server's errors.
func handshake(t *testing.T, server, client *tls.Config) (clientErr, serverErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		b, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer b.Close()
		b.SetDeadline(time.Now().Add(5 * time.Second))
		s := tls.Server(b, server)
		err = s.Handshake()
		if err == nil {
			// Under TLS 1.3 the client finishes first; answer one byte so
			// that the client sees a refusal of its certificate.
			if _, err = s.Read(make([]byte, 1)); err == nil {
				_, err = s.Write([]byte{1})
			}
		}
		done <- err
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.SetDeadline(time.Now().Add(5 * time.Second))
	c := tls.Client(a, client)
	clientErr = c.Handshake()
	if clientErr == nil {
		if _, clientErr = c.Write([]byte{1}); clientErr == nil {
			_, clientErr = c.Read(make([]byte, 1))
		}
	}
	a.Close()
	return clientErr, <-done
}

func material(t *testing.T, ca *devpki.CA, id string) *tlsconf.Material {
	t.Helper()
	m, err := ca.NodeMaterial(id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPeer_MutualTLSAcceptsOnlyNodeCertificatesOfTheClusterCA(t *testing.T) {
	ca, _ := devpki.NewCA("cluster")
	other, _ := devpki.NewCA("other")
	n1, n2 := material(t, ca, "n1"), material(t, ca, "n2")
	if _, err := handshake(t, n1.PeerServer(), n2.PeerClient()); err != nil {
		t.Fatalf("two members: %v", err)
	}

	stranger := material(t, other, "n9")
	if _, err := handshake(t, n1.PeerServer(), stranger.PeerClient()); err == nil {
		t.Fatal("a node certificate of another CA was accepted by the raft listener")
	}
	if cerr, _ := handshake(t, stranger.PeerServer(), n1.PeerClient()); cerr == nil {
		t.Fatal("a member dialed a peer whose certificate is of another CA")
	}
	// No certificate at all.
	if _, err := handshake(t, n1.PeerServer(), tlsconf.ClientWithPool(n1.CAs)); err == nil {
		t.Fatal("a dialer without a certificate was accepted")
	}
	// A client certificate of the right CA is not a node certificate.
	cp, _ := ca.Client("cli")
	cert, _ := cp.TLS()
	cc := tlsconf.ClientWithPool(n1.CAs)
	cc.InsecureSkipVerify = true
	cc.Certificates = []tls.Certificate{cert}
	_, serr := handshake(t, n1.PeerServer(), cc)
	if !errors.Is(serr, tlsconf.ErrNotNodeCert) {
		t.Fatalf("client certificate on the raft listener: server error %v, want ErrNotNodeCert", serr)
	}
}

func TestServer_ClientsMustTrustTheCA(t *testing.T) {
	ca, _ := devpki.NewCA("cluster")
	other, _ := devpki.NewCA("other")
	n1 := material(t, ca, "n1")
	good := tlsconf.ClientWithPool(n1.CAs)
	good.ServerName = "127.0.0.1"
	if cerr, _ := handshake(t, n1.Server(), good); cerr != nil {
		t.Fatalf("client trusting the CA: %v", cerr)
	}
	bad := tlsconf.ClientWithPool(material(t, other, "x").CAs)
	bad.ServerName = "127.0.0.1"
	if cerr, _ := handshake(t, n1.Server(), bad); cerr == nil {
		t.Fatal("a client trusting another CA completed the handshake")
	}
	old := tlsconf.ClientWithPool(n1.CAs)
	old.ServerName = "127.0.0.1"
	old.MaxVersion = tls.VersionTLS11
	if cerr, _ := handshake(t, n1.Server(), old); cerr == nil {
		t.Fatal("TLS 1.1 was accepted")
	}
}

func TestFromPEM_RefusesACertificateOfAnotherCA(t *testing.T) {
	ca, _ := devpki.NewCA("cluster")
	other, _ := devpki.NewCA("other")
	p, _ := other.Node("n1")
	if _, err := tlsconf.FromPEM(p.CertPEM, p.KeyPEM, ca.CertPEM); !errors.Is(err, tlsconf.ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
}

// Raft dials resume their TLS session with a peer they have talked to, and
// both ends still know (and checked) each other's node certificate.
func TestPeer_RaftDialsResumeSessions(t *testing.T) {
	ca, _ := devpki.NewCA("cluster")
	server, client := material(t, ca, "n1").PeerServer(), material(t, ca, "n2").PeerClient()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan tls.ConnectionState, 2)
	go func() {
		for range 2 {
			b, err := ln.Accept()
			if err != nil {
				return
			}
			b.SetDeadline(time.Now().Add(5 * time.Second))
			s := tls.Server(b, server)
			if _, err := s.Read(make([]byte, 1)); err == nil {
				_, _ = s.Write([]byte{1})
			}
			served <- s.ConnectionState()
			b.Close()
		}
	}()
	for i := range 2 {
		a, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		a.SetDeadline(time.Now().Add(5 * time.Second))
		c := tls.Client(a, client)
		if _, err := c.Write([]byte{1}); err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		if _, err := c.Read(make([]byte, 1)); err != nil { // takes the session ticket
			t.Fatalf("dial %d: %v", i, err)
		}
		cs, ss := c.ConnectionState(), <-served
		a.Close()
		if cs.DidResume != (i == 1) || ss.DidResume != (i == 1) {
			t.Fatalf("dial %d: resumed %v (server %v), want %v", i, cs.DidResume, ss.DidResume, i == 1)
		}
		if len(cs.PeerCertificates) == 0 || len(ss.PeerCertificates) == 0 {
			t.Fatalf("dial %d: peer certificates unknown (client %d, server %d)", i, len(cs.PeerCertificates), len(ss.PeerCertificates))
		}
	}
}
