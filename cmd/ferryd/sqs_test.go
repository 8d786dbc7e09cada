package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/freeport"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/node"
)

// TestFerryd_SQSAddrServesTheAPIOverTLS starts a one-node cluster the way
// ferryd does, with FERRY_SQS_ADDR set and a tokens file, and calls the
// SQS API over HTTPS with the cluster CA: requests are signed with a
// token's SQS key and get that token's permissions.
func TestFerryd_SQSAddrServesTheAPIOverTLS(t *testing.T) {
	pki := t.TempDir()
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	const sqsKey = "app-sqs-secret-access-key"
	if err := auth.AddToFile(tokens, auth.FileToken{Name: "app", SHA256: auth.HashSecret("app-token-secret"),
		Permissions: []auth.FilePermission{{Queues: []string{"tls-*"}, Actions: []string{"send", "admin"}}}, SQSSecretKey: sqsKey}); err != nil {
		t.Fatal(err)
	}
	if err := runDevPKI([]string{"-dir", pki, "-nodes", "a"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	gossip, err := freeport.Loopback("127.0.0.1") // below the ephemeral range
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FERRY_SQS_ADDR", "127.0.0.1:0")
	o, err := parseFlags([]string{"-id", "a", "-data-dir", t.TempDir(), "-bootstrap-expect", "1", "-fast-gossip",
		"-raft-addr", "127.0.0.1:0", "-client-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-gossip-addr", gossip,
		"-tls-cert", filepath.Join(pki, "a.pem"), "-tls-key", filepath.Join(pki, "a-key.pem"), "-tls-ca", filepath.Join(pki, "ca.pem"),
		"-gossip-key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "-tokens", tokens}, io.Discard)
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
	if cfg.Tokens, err = auth.LoadFile(tokens); err != nil {
		t.Fatal(err)
	}
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
	testwait.Until(t, 30*time.Second, "the SQS listener up", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.l != nil {
			addr = e.l.Addr()
		}
		return addr != ""
	})
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := tlsconf.CAPool(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	call := func(key, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/", bytes.NewReader([]byte(body)))
		req.Header.Set("X-Amz-Target", "AmazonSQS.CreateQueue")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		if key != "" {
			sum := sha256.Sum256([]byte(body))
			creds := aws.Credentials{AccessKeyID: "app", SecretAccessKey: key}
			if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("HTTPS call: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var body string
	testwait.UntilNil(t, 30*time.Second, "CreateQueue over HTTPS", func() error {
		var code int
		if code, body = call(sqsKey, `{"QueueName":"tls-check"}`); code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if !strings.Contains(body, "/tls-check") {
		t.Fatalf("CreateQueue over HTTPS: %s", body)
	}
	if code, body := call("", `{"QueueName":"tls-unsigned"}`); code == http.StatusOK || !strings.Contains(body, "IncompleteSignature") {
		t.Fatalf("unsigned request on a node with tokens: %d %s", code, body)
	}
	if code, body := call("wrong-key-0123456789", `{"QueueName":"tls-wrong"}`); code != http.StatusForbidden || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Fatalf("request signed with a wrong key: %d %s", code, body)
	}
	if code, body := call(sqsKey, `{"QueueName":"other"}`); code != http.StatusBadRequest || !strings.Contains(body, "AccessDenied") {
		t.Fatalf("create outside the token's patterns: %d %s", code, body)
	}
	// Plain HTTP gets the TLS server's refusal, never an SQS answer.
	if resp, err := http.Post("http://"+addr+"/", "application/x-amz-json-1.0", nil); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || resp.Header.Get("x-amzn-RequestId") != "" {
			t.Fatalf("plaintext HTTP served on a TLS node's SQS port: %s", resp.Status)
		}
	}
}
