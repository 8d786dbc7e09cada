package main

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/node"
)

// TestFerryd_SQSAddrServesTheAPIOverTLS starts a one-node cluster the way
// ferryd does, with FERRY_SQS_ADDR set, and calls the SQS API over HTTPS
// with the cluster CA.
func TestFerryd_SQSAddrServesTheAPIOverTLS(t *testing.T) {
	pki := t.TempDir()
	if err := runDevPKI([]string{"-dir", pki, "-nodes", "a"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gossip := ln.Addr().String()
	ln.Close()
	t.Setenv("FERRY_SQS_ADDR", "127.0.0.1:0")
	o, err := parseFlags([]string{"-id", "a", "-data-dir", t.TempDir(), "-bootstrap-expect", "1", "-fast-gossip",
		"-raft-addr", "127.0.0.1:0", "-client-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-gossip-addr", gossip,
		"-tls-cert", filepath.Join(pki, "a.pem"), "-tls-key", filepath.Join(pki, "a-key.pem"), "-tls-ca", filepath.Join(pki, "ca.pem"),
		"-gossip-key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.sqs.addr != "127.0.0.1:0" {
		t.Fatalf("FERRY_SQS_ADDR not applied: %q", o.sqs.addr)
	}
	logger := slog.New(slog.DiscardHandler)
	keys, _ := o.gossipKeys()
	cfg := o.config(logger)
	cfg.GossipKeys = keys
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	e, err := startSQS(o, n, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	var addr string
	for deadline := time.Now().Add(30 * time.Second); addr == ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("SQS listener not up after 30s")
		}
		e.mu.Lock()
		if e.l != nil {
			addr = e.l.Addr()
		}
		e.mu.Unlock()
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := tlsconf.CAPool(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/", bytes.NewReader([]byte(`{"QueueName":"tls-check"}`)))
	req.Header.Set("X-Amz-Target", "AmazonSQS.CreateQueue")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("HTTPS call: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "/tls-check") {
		t.Fatalf("CreateQueue over HTTPS: %s %s", resp.Status, body)
	}
	// Plain HTTP gets the TLS server's refusal, never an SQS answer.
	if resp, err := http.Post("http://"+addr+"/", "application/x-amz-json-1.0", nil); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || resp.Header.Get("x-amzn-RequestId") != "" {
			t.Fatalf("plaintext HTTP served on a TLS node's SQS port: %s", resp.Status)
		}
	}
}
