package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/node"
)

// startTokenNode starts a one-node plaintext cluster that requires the
// tokens of file.
func startTokenNode(t *testing.T, file auth.File) *node.Node {
	t.Helper()
	data, _ := json.Marshal(file)
	set, err := auth.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig("n1", filepath.Join(t.TempDir(), "n1"), "127.0.0.1", 0)
	cfg.Insecure = true
	cfg.Tokens = set
	cfg.RaftAddr, cfg.ClientAddr, cfg.HTTPAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", freeAddr(t)
	cfg.BootstrapExpect = 1
	cfg.GossipFast = true
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 150*time.Millisecond, 150*time.Millisecond, 100*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	nd, err := node.Start(cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { nd.Close() })
	return nd
}

func TestCLI_TokenRequiredAndPermissionsShown(t *testing.T) {
	nd := startTokenNode(t, auth.File{Tokens: []auth.FileToken{
		{Name: "ops", SHA256: auth.HashSecret("ops-secret"), Cluster: []string{"admin"}},
		{Name: "sender", SHA256: auth.HashSecret("sender-secret"),
			Permissions: []auth.FilePermission{{Queues: []string{"orders"}, Actions: []string{"send"}}}},
	}})
	base := []string{"-s", nd.ClientAddr(), "--insecure", "--timeout", "10s"}
	tokenFile := filepath.Join(t.TempDir(), "ops.token")
	if err := os.WriteFile(tokenFile, []byte("ops-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, code := runFerry(t, []string{"FERRY_TOKEN_FILE=" + tokenFile}, append(base, "queue", "create", "orders")...)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create with the admin token file: exit %d: %s", code, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	out, code := runFerry(t, nil, append(base, "send", "orders", "hello")...)
	if code == 0 || !strings.Contains(out, "requires a token") || strings.Count(out, "ferry:") != 1 {
		t.Fatalf("send without a token: exit %d: %s", code, out)
	}
	out, code = runFerry(t, nil, append(base, "--token", "wrong", "send", "orders", "hello")...)
	if code == 0 || !strings.Contains(out, "refused the token") {
		t.Fatalf("send with an unknown token: exit %d: %s", code, out)
	}
	if out, code = runFerry(t, []string{"FERRY_TOKEN=sender-secret"}, append(base, "send", "orders", "hello")...); code != 0 {
		t.Fatalf("send with the sender token: exit %d: %s", code, out)
	}
	out, code = runFerry(t, []string{"FERRY_TOKEN=sender-secret"}, append(base, "recv", "orders")...)
	if code == 0 || !strings.Contains(out, "unauthorized") || !strings.Contains(out, "receive permission") {
		t.Fatalf("recv with a send-only token: exit %d: %s", code, out)
	}
	out, code = runFerry(t, []string{"FERRY_TOKEN=sender-secret"}, append(base, "queue", "stats", "orders")...)
	if code != 0 || !strings.Contains(out, "1") {
		t.Fatalf("stats with the sender token: exit %d: %s", code, out)
	}
}
