package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/node"
)

// startTokenNode starts a one-node plaintext cluster that requires the
// tokens of file; admin is the secret of one with the cluster admin
// permission.
func startTokenNode(t *testing.T, file auth.File, admin string) *node.Node {
	t.Helper()
	data, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return ferrytest.Start(t, ferrytest.Options{TokensFile: path, Token: admin}).Nodes()[0]
}

func TestCLI_TokenRequiredAndPermissionsShown(t *testing.T) {
	nd := startTokenNode(t, auth.File{Tokens: []auth.FileToken{
		{Name: "ops", SHA256: auth.HashSecret("ops-secret"), Cluster: []string{"admin"}},
		{Name: "sender", SHA256: auth.HashSecret("sender-secret"),
			Permissions: []auth.FilePermission{{Queues: []string{"orders"}, Actions: []string{"send"}}}},
	}}, "ops-secret")
	base := []string{"-s", nd.ClientAddr(), "--insecure", "--timeout", "10s"}
	tokenFile := filepath.Join(t.TempDir(), "ops.token")
	if err := os.WriteFile(tokenFile, []byte("ops-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testwait.UntilNil(t, 20*time.Second, "queue created with the admin token file", func() error {
		if out, code := runFerry(t, []string{"FERRY_TOKEN_FILE=" + tokenFile}, append(base, "queue", "create", "orders")...); code != 0 {
			return fmt.Errorf("exit %d: %s", code, out)
		}
		return nil
	})
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
