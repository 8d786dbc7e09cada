package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/test/chaos"
)

// On three real ferryd processes (TLS, -tokens): a token works, the admin
// port refuses requests without a token, and after the token's entry is
// removed from the tokens file and the nodes get SIGHUP, new connections
// with it are refused while the admin token still works.
func TestCluster_FerrydSIGHUPRevokesToken(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs per-node loopback addresses (127.0.1.x)")
	}
	bin, err := chaos.BuildFerryd(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := chaos.NewCluster(chaos.ClusterOptions{Nodes: 3, Root: t.TempDir(), Bin: bin, TLS: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	workerSecret, _ := auth.NewSecret()
	if err := auth.AddToFile(c.TokensFile, grant("worker", workerSecret, []string{"jobs"}, "send", "receive")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	startFerryds(ctx, t, c)
	dial := func(token string) (*client.Client, error) {
		cl, err := client.Dial(ctx, c.ClientAddrs(), client.WithTLS(c.ClientTLS), client.WithToken(token), client.WithDialTimeout(time.Second))
		if err == nil {
			t.Cleanup(func() { cl.Close() })
		}
		return cl, err
	}
	admin, err := dial(c.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	untilNil(t, ctx, "queue jobs created", func() error { return admin.CreateQueue(ctx, "jobs") })
	worker, err := dial(workerSecret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Queue("jobs").Send(ctx, client.Message{Body: []byte("1")}); err != nil {
		t.Fatalf("worker send: %v", err)
	}
	if _, err := dial(""); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("dial without a token: %v", err)
	}
	// The harness's own admin API probes present the admin token.
	if reps, err := c.Replicas(ctx, c.Nodes[0]); err != nil {
		t.Fatalf("harness probe of /v1/replicas: %v", err)
	} else if len(reps) == 0 {
		t.Fatal("harness probe of /v1/replicas: no replicas")
	}
	bare := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c.ClientTLS}}
	resp, err := bare.Get(c.URL(c.Nodes[0], "/v1/cluster"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/cluster without a token: %s", resp.Status)
	}

	// Drop the worker's entry and send SIGHUP.
	data, err := os.ReadFile(c.TokensFile)
	if err != nil {
		t.Fatal(err)
	}
	var f auth.File
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	kept := f.Tokens[:0]
	for _, tok := range f.Tokens {
		if tok.Name != "worker" {
			kept = append(kept, tok)
		}
	}
	f.Tokens = kept
	out, _ := json.Marshal(f)
	if err := os.WriteFile(c.TokensFile, out, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if err := c.Reload(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes {
		untilNil(t, ctx, n.ID+" refusing the revoked token after SIGHUP", func() error {
			cl, err := client.Dial(ctx, []string{n.ClientAddr}, client.WithTLS(c.ClientTLS), client.WithToken(workerSecret))
			if errors.Is(err, client.ErrUnauthorized) {
				return nil
			}
			if err == nil {
				cl.Close()
			}
			return fmt.Errorf("dial with the revoked token: %v", err)
		})
	}
	if _, err := worker.Queue("jobs").Send(ctx, client.Message{Body: []byte("2")}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("send on the worker's open connection after SIGHUP: %v", err)
	}
	if st := completeStats(t, ctx, admin, "jobs"); st.Total().Ready != 1 {
		t.Fatalf("jobs after revocation: %+v; want 1 ready message", st.Total())
	}
	if crashes := c.Crashes(); len(crashes) > 0 {
		t.Fatalf("nodes exited: %v", crashes)
	}
}

// startFerryds starts every node of a real-process cluster, closes them
// when the test ends, and waits until the cluster is ready or ctx ends.
func startFerryds(ctx context.Context, t *testing.T, c *chaos.Cluster) {
	t.Helper()
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(true) })
	untilNil(t, ctx, "the cluster ready", func() error {
		if !c.Ready(ctx) {
			return fmt.Errorf("not ready; crashes %v", c.Crashes())
		}
		return nil
	})
}
