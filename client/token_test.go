package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

func TestClient_TokenPresentedAndRefusalFinal(t *testing.T) {
	fc := newFake(t, 2)
	fc.mu.Lock()
	fc.token = "right"
	fc.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := client.Dial(ctx, fc.Addrs(), client.WithToken("wrong"))
	if !errors.Is(err, client.ErrUnauthorized) || errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("wrong token: %v", err)
	}
	if strings.Count(err.Error(), "ferry:") != 1 || !strings.Contains(err.Error(), "unknown token") {
		t.Fatalf("error text %q", err)
	}
	if _, err := client.Dial(ctx, fc.Addrs()); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("no token: %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("refusals took %v: retried?", time.Since(start))
	}
	c, err := client.Dial(ctx, fc.Addrs(), client.WithToken("right"))
	if err != nil {
		t.Fatalf("right token: %v", err)
	}
	c.Close()
}
