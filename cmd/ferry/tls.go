package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/spf13/cobra"
)

// devCA is the CA that `make run` writes; the CLI run from the checkout
// trusts it when no --ca is given.
const devCA = "data/pki/ca.pem"

// tlsFlags select how the CLI secures its connections.
type tlsFlags struct {
	ca, cert, key string
	insecure      bool
}

// register adds --ca, --cert, --key and --insecure, with their
// environment twins as defaults.
func (f *tlsFlags) register(cmd *cobra.Command) {
	insecure, _ := strconv.ParseBool(os.Getenv("FERRY_INSECURE"))
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.ca, "ca", os.Getenv("FERRY_CA"),
		"PEM CA bundle the servers' certificates are checked against (env FERRY_CA; default "+devCA+" when present, else the system roots)")
	pf.StringVar(&f.cert, "cert", os.Getenv("FERRY_CERT"), "PEM client certificate to present (env FERRY_CERT)")
	pf.StringVar(&f.key, "key", os.Getenv("FERRY_KEY"), "PEM key of --cert (env FERRY_KEY)")
	pf.BoolVar(&f.insecure, "insecure", insecure, "connect in plaintext, to a cluster started with -insecure (env FERRY_INSECURE)")
}

// config returns the TLS config to dial with, or nil for --insecure.
func (f *tlsFlags) config() (*tls.Config, error) {
	if f.insecure {
		if f.ca != "" || f.cert != "" {
			return nil, fmt.Errorf("--insecure excludes --ca and --cert")
		}
		return nil, nil
	}
	ca := f.ca
	if ca == "" {
		if _, err := os.Stat(devCA); err == nil {
			ca = devCA
		}
	}
	c, err := tlsconf.Client(ca, f.cert, f.key)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// tlsHint explains a failed TLS handshake in one line, or returns "" when
// err is something else.
func tlsHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var record tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return "the servers' certificate is not signed by a trusted CA: give the cluster CA with --ca or FERRY_CA (make run writes " + devCA + ")"
	case errors.As(err, &hostname):
		return "the servers' certificate does not name the address dialed: " + hostname.Error()
	case errors.As(err, &record):
		return "the server does not speak TLS: if the cluster runs with -insecure, pass --insecure"
	}
	return ""
}
