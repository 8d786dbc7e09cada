package devpki

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferrymq/ferry/internal/tlsconf"
)

func TestInit_CreatesACAAndCertificatesThatLoadAndKeepsThemOnASecondRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	created, err := Init(dir, []string{"node1", "node2"}, []string{"127.0.1.11"})
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 8 {
		t.Fatalf("created %d files, want 8: %v", len(created), created)
	}
	f := Files{Dir: dir}
	m, err := tlsconf.Load(f.Cert("node1"), f.Key("node1"), f.CA())
	if err != nil {
		t.Fatal(err)
	}
	leaf := m.Cert.Leaf
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: m.CAs, DNSName: "127.0.1.11"}); err != nil {
		t.Errorf("node certificate not valid for the extra host: %v", err)
	}
	for _, name := range []string{"localhost", "node1", "127.0.0.1"} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("node certificate not valid for %s: %v", name, err)
		}
	}
	if st, err := os.Stat(f.CAKey()); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("CA key mode %v (%v), want 0600", st.Mode(), err)
	}
	// A client certificate is not a node certificate.
	if _, err := tlsconf.Load(f.Cert("client"), f.Key("client"), f.CA()); err == nil {
		t.Error("the client certificate loaded as a node certificate")
	}

	before, _ := os.ReadFile(f.CA())
	created, err = Init(dir, []string{"node1", "node3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 2 || created[0] != f.Cert("node3") {
		t.Fatalf("second run created %v, want node3's two files only", created)
	}
	after, _ := os.ReadFile(f.CA())
	if string(before) != string(after) {
		t.Fatal("second run replaced the CA")
	}
	if _, err := tlsconf.Load(f.Cert("node3"), f.Key("node3"), f.CA()); err != nil {
		t.Fatalf("node3 issued by the kept CA does not load: %v", err)
	}
}

func TestIssue_RefusesABadName(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Node("../x"); err == nil {
		t.Fatal("a path-like name was accepted")
	}
}
