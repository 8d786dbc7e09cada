package ferrytest_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/auth"
)

func TestStart_OneAndThreeNodes(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(map[int]string{1: "one", 3: "three"}[n], func(t *testing.T) {
			fc := ferrytest.Start(t, ferrytest.Options{Nodes: n})
			if got := len(fc.Addrs()); got != n {
				t.Fatalf("%d addresses, want %d", got, n)
			}
			q := fc.CreateQueue("jobs", client.Partitions(2))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := q.Send(ctx, client.Message{ID: "j1", Body: []byte("work")}); err != nil {
				t.Fatalf("Send: %v", err)
			}
			other := fc.Dial().Queue("jobs")
			ds, err := other.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 5 * time.Second})
			if err != nil || len(ds) != 1 || string(ds[0].Body) != "work" {
				t.Fatalf("Receive: %v %v", ds, err)
			}
			if err := ds[0].Ack(ctx); err != nil {
				t.Fatalf("Ack: %v", err)
			}
			ci, err := fc.Client().Cluster(ctx)
			if err != nil || len(ci.Nodes) != n {
				t.Fatalf("Cluster: %d nodes, %v", len(ci.Nodes), err)
			}
		})
	}
}

// With TLS and a tokens file the cluster's own clients trust its CA and
// present the token; a client without the CA or the token gets nowhere.
func TestStart_TLSAndTokens(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	if err := auth.AddToFile(tokens, auth.FileToken{Name: "ops", SHA256: auth.HashSecret("ops-secret"),
		Cluster: []string{"admin"}}); err != nil {
		t.Fatal(err)
	}
	fc := ferrytest.Start(t, ferrytest.Options{TLS: true, TokensFile: tokens, Token: "ops-secret"})
	q := fc.CreateQueue("jobs")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := q.Send(ctx, client.Message{ID: "j1", Body: []byte("work")}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if fc.CAFile() == "" || fc.TLSConfig() == nil {
		t.Fatalf("CAFile %q, TLSConfig %v: want both for a TLS cluster", fc.CAFile(), fc.TLSConfig())
	}
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	if _, err := client.Dial(short, fc.Addrs(), client.WithDialTimeout(time.Second)); err == nil {
		t.Fatal("a plaintext client got through")
	}
	_, err := client.Dial(short, fc.Addrs(), client.WithTLS(fc.TLSConfig()))
	if !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("a client without the token: %v, want ErrUnauthorized", err)
	}
}
