package main

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferrymq/ferry/internal/devpki"
)

// healthServer is a TLS server on 127.0.0.1 answering /healthz with code,
// with a certificate of a fresh CA whose PEM file it returns.
func healthServer(t *testing.T, code int) (*httptest.Server, string) {
	t.Helper()
	ca, err := devpki.NewCA("health test CA")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Node("node1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pair.TLS()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(code)
		w.Write([]byte("ok\n"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return srv, caFile
}

func TestHealth_ExitsZeroOnlyWhenTheNodeAnswers200OverTrustedTLS(t *testing.T) {
	ok, okCA := healthServer(t, http.StatusOK)
	url := ok.URL + "/healthz"
	if out, code := runFerry(t, nil, "health", "--url", url, "--ca", okCA); code != 0 || !strings.Contains(out, "ok "+url) {
		t.Fatalf("healthy node with --ca: exit %d: %s", code, out)
	}
	// ferryd's own CA variable is enough: the check runs beside the node.
	if out, code := runFerry(t, []string{"FERRY_TLS_CA=" + okCA}, "health", "--url", url); code != 0 {
		t.Fatalf("healthy node with FERRY_TLS_CA: exit %d: %s", code, out)
	}
	if out, code := runFerry(t, nil, "health", "--url", url); code == 0 || !strings.Contains(out, "--ca") {
		t.Fatalf("without the CA: exit %d: %s, want a failure pointing at --ca", code, out)
	}
	sick, sickCA := healthServer(t, http.StatusServiceUnavailable)
	if out, code := runFerry(t, nil, "health", "--url", sick.URL+"/healthz", "--ca", sickCA); code == 0 || !strings.Contains(out, "503") {
		t.Fatalf("node answering 503: exit %d: %s, want a failure naming the status", code, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	if out, code := runFerry(t, nil, "health", "--timeout", "3s", "--url", "https://"+down+"/healthz", "--ca", okCA); code == 0 {
		t.Fatalf("nothing listening: exit 0: %s", out)
	}
	for _, bad := range []string{"ftp://x/healthz", "127.0.0.1:7201", "https:///healthz"} {
		if out, code := runFerry(t, nil, "health", "--url", bad); code == 0 || !strings.Contains(out, "want an http:// or https:// URL") {
			t.Errorf("--url %q: exit %d: %s", bad, code, out)
		}
	}
}

func TestHealth_DefaultURLFollowsFerrydEnvironment(t *testing.T) {
	srv, ca := healthServer(t, http.StatusOK)
	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"FERRY_TLS_CA=" + ca, "FERRY_HTTP_ADDR=" + host + ":" + port}
	if out, code := runFerry(t, env, "health"); code != 0 || !strings.Contains(out, "https://"+host+":"+port+"/healthz") {
		t.Fatalf("FERRY_HTTP_ADDR: exit %d: %s", code, out)
	}
	for _, c := range []struct {
		env      []string
		insecure bool
		want     string
	}{
		{nil, false, "https://127.0.0.1:7201/healthz"},
		{[]string{"FERRY_IP=10.0.0.11"}, false, "https://10.0.0.11:7201/healthz"},
		{[]string{"FERRY_IP=10.0.0.11", "FERRY_PORT_OFFSET=2"}, true, "http://10.0.0.11:7203/healthz"},
		{[]string{"FERRY_IP=::1"}, false, "https://[::1]:7201/healthz"},
	} {
		for _, k := range []string{"FERRY_HTTP_ADDR", "FERRY_IP", "FERRY_PORT_OFFSET"} {
			t.Setenv(k, "")
		}
		for _, kv := range c.env {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		got, err := defaultHealthURL(c.insecure)
		if err != nil || got != c.want {
			t.Errorf("env %v: %q, %v; want %q", c.env, got, err, c.want)
		}
	}
	t.Setenv("FERRY_PORT_OFFSET", "two")
	if _, err := defaultHealthURL(false); err == nil || !strings.Contains(err.Error(), "FERRY_PORT_OFFSET") {
		t.Errorf("bad FERRY_PORT_OFFSET: %v", err)
	}
}
