// Package devpki creates a throwaway public key infrastructure for local
// and test clusters: a CA, one certificate per node (valid for server and
// client authentication, as raft's mutual TLS needs) and a client
// certificate. Keys are ECDSA P-256; everything is valid for a year.
//
// It is for development and tests only: the CA key sits beside the
// certificates, unencrypted.
package devpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/ferrymq/ferry/internal/tlsconf"
)

// Errors of the package.
var (
	// ErrInvalid is returned for a bad name or host, or an existing CA that
	// cannot be read back.
	ErrInvalid = errors.New("devpki: invalid request")
)

// validity is how long generated certificates last.
const validity = 365 * 24 * time.Hour

// namePattern restricts certificate file names (node ids).
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CA is a certificate authority able to issue certificates.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
}

// Pair is an issued certificate and its key, PEM encoded.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// TLS returns the pair as a tls.Certificate.
func (p Pair) TLS() (tls.Certificate, error) { return tls.X509KeyPair(p.CertPEM, p.KeyPEM) }

// NewCA creates a fresh CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Ferry development"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemBlock("CERTIFICATE", der)}, nil
}

// Node issues a node certificate for id, valid for server and client
// authentication, with id, "localhost", 127.0.0.1 and hosts (IPs or DNS
// names) as subject alternative names.
func (ca *CA) Node(id string, hosts ...string) (Pair, error) {
	return ca.issue(id, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		append([]string{id, "localhost", "127.0.0.1"}, hosts...))
}

// Client issues a client certificate for name (client authentication
// only: it cannot act as a node).
func (ca *CA) Client(name string) (Pair, error) {
	return ca.issue(name, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil)
}

func (ca *CA) issue(name string, usage []x509.ExtKeyUsage, hosts []string) (Pair, error) {
	if !namePattern.MatchString(name) {
		return Pair{}, fmt.Errorf("%w: name %q: want 1..64 of [A-Za-z0-9._-]", ErrInvalid, name)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"Ferry development"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Pair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("EC PRIVATE KEY", keyDER)}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// Files name the files of a directory written by Init.
type Files struct {
	Dir string
}

// CA returns the path of the CA certificate.
func (f Files) CA() string { return filepath.Join(f.Dir, "ca.pem") }

// CAKey returns the path of the CA key.
func (f Files) CAKey() string { return filepath.Join(f.Dir, "ca-key.pem") }

// Cert returns the path of name's certificate.
func (f Files) Cert(name string) string { return filepath.Join(f.Dir, name+".pem") }

// Key returns the path of name's key.
func (f Files) Key(name string) string { return filepath.Join(f.Dir, name+"-key.pem") }

// Init makes sure dir holds a CA (ca.pem, ca-key.pem), a node certificate
// <id>.pem and key <id>-key.pem for every node id (with hosts as extra
// names), and a client certificate client.pem, client-key.pem. Existing
// files are kept: a second Init only adds what is missing, so certificates
// already handed to nodes stay valid. It reports the files it created.
func Init(dir string, nodeIDs, hosts []string) ([]string, error) {
	f := Files{Dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var created []string
	ca, err := loadCA(f)
	if errors.Is(err, os.ErrNotExist) {
		if ca, err = NewCA("Ferry development CA"); err != nil {
			return nil, err
		}
		keyDER, err := x509.MarshalECPrivateKey(ca.Key)
		if err != nil {
			return nil, err
		}
		if err := write(f.CAKey(), pemBlock("EC PRIVATE KEY", keyDER), 0o600); err != nil {
			return nil, err
		}
		if err := write(f.CA(), ca.CertPEM, 0o644); err != nil {
			return nil, err
		}
		created = append(created, f.CA(), f.CAKey())
	} else if err != nil {
		return nil, err
	}
	issue := func(name string, gen func() (Pair, error)) error {
		if _, err := os.Stat(f.Cert(name)); err == nil {
			return nil
		}
		p, err := gen()
		if err != nil {
			return err
		}
		if err := write(f.Key(name), p.KeyPEM, 0o600); err != nil {
			return err
		}
		created = append(created, f.Cert(name), f.Key(name))
		return write(f.Cert(name), p.CertPEM, 0o644)
	}
	for _, id := range nodeIDs {
		if err := issue(id, func() (Pair, error) { return ca.Node(id, hosts...) }); err != nil {
			return created, err
		}
	}
	if err := issue("client", func() (Pair, error) { return ca.Client("client") }); err != nil {
		return created, err
	}
	return created, nil
}

// loadCA reads the CA of f; the error wraps os.ErrNotExist when there is
// none yet.
func loadCA(f Files) (*CA, error) {
	certPEM, err := os.ReadFile(f.CA())
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(f.CAKey())
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: CA in %s: %w", ErrInvalid, f.Dir, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || !pair.Leaf.IsCA {
		return nil, fmt.Errorf("%w: %s is not an ECDSA CA", ErrInvalid, f.CA())
	}
	return &CA{Cert: pair.Leaf, Key: key, CertPEM: certPEM}, nil
}

// write creates path with data, failing if it exists.
func write(path string, data []byte, perm os.FileMode) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := fh.Write(data); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// NodeMaterial issues a node certificate for id (see Node) and returns it
// with the CA as tlsconf.Material, ready for node.Config.TLS.
func (ca *CA) NodeMaterial(id string, hosts ...string) (*tlsconf.Material, error) {
	p, err := ca.Node(id, hosts...)
	if err != nil {
		return nil, err
	}
	return tlsconf.FromPEM(p.CertPEM, p.KeyPEM, ca.CertPEM)
}
