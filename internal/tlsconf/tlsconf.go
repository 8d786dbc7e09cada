// Package tlsconf turns a certificate, its key and a CA bundle into the
// tls.Configs a node and its clients use:
//
//   - Server: the client protocol and HTTP admin listeners. The node
//     presents its certificate; a client certificate is verified against
//     the CA when one is given, but not required.
//   - PeerServer and PeerClient: node-to-node raft traffic, in mutual TLS.
//     Both sides present their certificate and verify the other's against
//     the CA, and both require a node certificate (one valid for server
//     and client authentication), so a client certificate from the same CA
//     cannot speak raft. Peers are checked against the CA only, not
//     against a host name: any node of the cluster may dial any other
//     under whatever address it advertises.
//
// Every config accepts TLS 1.2 and 1.3 only, with the forward-secret AEAD
// cipher suites for 1.2 (1.3 suites are fixed by crypto/tls).
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
)

// Errors of the package.
var (
	// ErrInvalid is returned for a certificate, key or CA that cannot be
	// read or parsed, or a certificate without the key usages it needs.
	ErrInvalid = errors.New("tlsconf: invalid TLS material")
	// ErrNotNodeCert is returned by peer verification when the peer's
	// certificate is not valid for both server and client authentication.
	ErrNotNodeCert = errors.New("tlsconf: peer certificate is not a node certificate")
)

// MinVersion is the oldest TLS version any config accepts.
const MinVersion = tls.VersionTLS12

// cipherSuites are the TLS 1.2 suites allowed: ECDHE key exchange with an
// AEAD cipher only.
var cipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// Material is a node's certificate chain and key plus the cluster CA pool.
type Material struct {
	// Cert is the node's certificate chain and private key.
	Cert tls.Certificate
	// CAs holds the cluster CA certificates peers and clients are verified
	// against.
	CAs *x509.CertPool
}

// Load reads a PEM certificate chain, its PEM private key and a PEM CA
// bundle from files.
func Load(certFile, keyFile, caFile string) (*Material, error) {
	read := func(what, path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, what, err)
		}
		return b, nil
	}
	certPEM, err := read("certificate", certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read("key", keyFile)
	if err != nil {
		return nil, err
	}
	caPEM, err := read("CA", caFile)
	if err != nil {
		return nil, err
	}
	m, err := FromPEM(certPEM, keyPEM, caPEM)
	if err != nil {
		return nil, fmt.Errorf("%w (files %s, %s, %s)", err, certFile, keyFile, caFile)
	}
	return m, nil
}

// FromPEM builds Material from PEM bytes. The certificate must chain to
// the CA and be valid for both server and client authentication (a node
// certificate).
func FromPEM(certPEM, keyPEM, caPEM []byte) (*Material, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate and key: %w", ErrInvalid, err)
	}
	pool, err := CAPool(caPEM)
	if err != nil {
		return nil, err
	}
	leaf := cert.Leaf
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("%w: certificate does not chain to the CA: %w", ErrInvalid, err)
	}
	if err := checkNodeUsage(leaf); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &Material{Cert: cert, CAs: pool}, nil
}

// CAPool parses a PEM bundle of CA certificates; it fails on a bundle with
// none.
func CAPool(caPEM []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: CA bundle holds no PEM certificate", ErrInvalid)
	}
	return pool, nil
}

// checkNodeUsage reports whether c may serve as a node certificate: valid
// for server and client authentication (or any usage).
func checkNodeUsage(c *x509.Certificate) error {
	if slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageAny) {
		return nil
	}
	if !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return fmt.Errorf("%w: %q must list extended key usages serverAuth and clientAuth", ErrNotNodeCert, c.Subject.CommonName)
	}
	return nil
}

// IsNodeCert reports whether c, already verified against the cluster CA,
// is a node certificate (valid for server and client authentication),
// the identity the raft port requires of its peers.
func IsNodeCert(c *x509.Certificate) bool { return checkNodeUsage(c) == nil }

// base returns a config with the version and cipher policy.
func base() *tls.Config {
	return &tls.Config{MinVersion: MinVersion, CipherSuites: cipherSuites}
}

// Server returns the config of the client protocol and HTTP admin
// listeners: the node's certificate, and client certificates verified
// against the CA when presented.
func (m *Material) Server() *tls.Config {
	c := base()
	c.Certificates = []tls.Certificate{m.Cert}
	c.ClientAuth = tls.VerifyClientCertIfGiven
	c.ClientCAs = m.CAs
	return c
}

// PeerServer returns the config of the raft listener: the handshake fails
// unless the dialer presents a node certificate signed by the CA.
func (m *Material) PeerServer() *tls.Config {
	c := base()
	c.Certificates = []tls.Certificate{m.Cert}
	c.ClientAuth = tls.RequireAndVerifyClientCert
	c.ClientCAs = m.CAs
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%w: none presented", ErrNotNodeCert)
		}
		return checkNodeUsage(cs.PeerCertificates[0])
	}
	return c
}

// PeerClient returns the config raft dials with: it presents the node's
// certificate and accepts only a peer whose node certificate chains to
// the CA (whatever address it was dialed at).
func (m *Material) PeerClient() *tls.Config {
	c := base()
	c.Certificates = []tls.Certificate{m.Cert}
	// The chain is verified below against the CA, without a host name:
	// peers are identified by the cluster CA, not by address.
	c.InsecureSkipVerify = true
	// Every raft group dials its own connections to each peer: resuming
	// a TLS session skips the certificate signatures of a full handshake
	// (VerifyConnection still checks the peer's chain). Sessions are
	// keyed by peer address; 256 covers any cluster's peers.
	c.ClientSessionCache = tls.NewLRUClientSessionCache(peerSessionCacheSize)
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		return verifyPeer(m.CAs, cs.PeerCertificates)
	}
	return c
}

// peerSessionCacheSize bounds the TLS sessions kept for raft dials.
const peerSessionCacheSize = 256

// verifyPeer checks that chain[0] is a node certificate signed by the CA.
func verifyPeer(roots *x509.CertPool, chain []*x509.Certificate) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: none presented", ErrNotNodeCert)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return err
	}
	return checkNodeUsage(chain[0])
}

// Client returns the config of a client of the client protocol or HTTP
// admin API: servers are verified against the CA in caFile (the system
// roots when caFile is empty) and, when certFile and keyFile are set, the
// client presents that certificate. The server name is left empty for the
// caller to set (the Ferry client sets it to the host of each address it
// dials).
func Client(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := base()
	if caFile != "" {
		caPEM, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CA: %w", ErrInvalid, err)
		}
		if c.RootCAs, err = CAPool(caPEM); err != nil {
			return nil, fmt.Errorf("%w (file %s)", err, caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both its certificate and key files", ErrInvalid)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate: %w", ErrInvalid, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// ClientWithPool is Client for a CA pool already in memory.
func ClientWithPool(pool *x509.CertPool) *tls.Config {
	c := base()
	c.RootCAs = pool
	return c
}
