package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/devpki"
	"github.com/ferrymq/ferry/node"
)

// runFerry runs the CLI with args and extra environment, and returns its
// output and exit code.
func runFerry(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ferryBin, args...)
	cmd.Dir = t.TempDir() // no data/pki here
	cmd.Env = append(append(os.Environ(), "FERRY_SERVERS=", "FERRY_CA=", "FERRY_INSECURE=", "FERRY_TOKEN=", "FERRY_TOKEN_FILE="), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

func TestCLI_TLSClusterNeedsItsCA(t *testing.T) {
	pki := filepath.Join(t.TempDir(), "pki")
	if _, err := devpki.Init(pki, []string{"n1"}, nil); err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig("n1", t.TempDir(), "127.0.0.1", 0)
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCAFile = filepath.Join(pki, "n1.pem"), filepath.Join(pki, "n1-key.pem"), filepath.Join(pki, "ca.pem")
	cfg.RaftAddr, cfg.ClientAddr, cfg.HTTPAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", loopbackAddr(t)
	cfg.BootstrapExpect = 1
	cfg.GossipFast = true
	cfg.Logger = slog.New(slog.DiscardHandler)
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	base := []string{"-s", n.ClientAddr(), "--timeout", "10s"}

	deadline := time.Now().Add(20 * time.Second)
	for {
		out, code := runFerry(t, nil, append(base, "--ca", cfg.TLSCAFile, "queue", "create", "tls-orders")...)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create with --ca: exit %d: %s", code, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, code := runFerry(t, []string{"FERRY_CA=" + cfg.TLSCAFile}, append(base, "queue", "ls")...); code != 0 || !strings.Contains(out, "tls-orders") {
		t.Fatalf("queue ls with FERRY_CA: exit %d: %s", code, out)
	}
	out, code := runFerry(t, nil, append(base, "--timeout", "3s", "queue", "ls")...)
	if code == 0 || !strings.Contains(out, "--ca") {
		t.Fatalf("without the CA: exit %d: %s, want a failure pointing at --ca", code, out)
	}
	out, code = runFerry(t, nil, append(base, "--timeout", "3s", "--insecure", "queue", "ls")...)
	if code == 0 || !strings.Contains(out, "drop --insecure") {
		t.Fatalf("--insecure against a TLS cluster: exit %d: %s, want a failure saying to drop --insecure", code, out)
	}
}
