package sqs

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/wire"
)

// reloadingCreds is a Credentials with reloads, as a node's tokens.
type reloadingCreds struct {
	mu     sync.Mutex
	keys   map[string]*auth.Token
	reload chan struct{}
}

func (c *reloadingCreds) Secret(id string) (string, *auth.Token, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tok, ok := c.keys[id]
	return id + "-secret", tok, ok
}

func (c *reloadingCreds) Reloaded() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reload
}

// set installs new keys and announces the reload, as SetTokens does.
func (c *reloadingCreds) set(keys map[string]*auth.Token) {
	c.mu.Lock()
	c.keys = keys
	old := c.reload
	c.reload = make(chan struct{})
	c.mu.Unlock()
	close(old)
}

func receiver(queues ...string) *auth.Token {
	return &auth.Token{Name: "k", Grants: []auth.Grant{{Patterns: queues, Actions: auth.Receive}}}
}

// TestWatchRevocation_EndsTheWaitAtTheRevokingReload: a reload that keeps
// the key's permission leaves the wait alone; the one that revokes the key
// ends it at once, and the caller gets InvalidClientTokenId (AccessDenied
// when only the permission went).
func TestWatchRevocation_EndsTheWaitAtTheRevokingReload(t *testing.T) {
	for name, tc := range map[string]struct {
		after map[string]*auth.Token
		want  error
	}{
		"key removed":     {map[string]*auth.Token{}, ErrInvalidClientTokenID},
		"permission gone": {map[string]*auth.Token{"k": receiver("other")}, ErrAccessDenied},
	} {
		creds := &reloadingCreds{keys: map[string]*auth.Token{"k": receiver("jobs")}, reload: make(chan struct{})}
		s := New(Config{Credentials: creds})
		r := &request{tok: receiver("jobs"), who: caller{tok: receiver("jobs"), key: "k", secret: "k-secret"}}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		revoked := s.watchRevocation(ctx, cancel, r, wire.OpReceive, "jobs")
		creds.set(map[string]*auth.Token{"k": receiver("jobs", "more")}) // still allowed
		select {
		case <-ctx.Done():
			t.Fatalf("%s: a reload that keeps the permission ended the wait", name)
		case <-time.After(50 * time.Millisecond):
		}
		start := time.Now()
		creds.set(tc.after)
		<-ctx.Done()
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s: the wait ended %s after the reload", name, d)
		}
		if err := revoked(); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", name, err, tc.want)
		}
		cancel()
	}
}

// TestWatchRevocation_LooksAgainWhenDone: without reload notices, and for
// a reload that lands as the wait ends, the last look at the credentials
// still refuses a revoked key; a request without a token is never revoked.
func TestWatchRevocation_LooksAgainWhenDone(t *testing.T) {
	keys := tokenCredentials{"k": receiver("jobs")}
	s := New(Config{Credentials: keys})
	r := &request{tok: receiver("jobs"), who: caller{tok: receiver("jobs"), key: "k", secret: "k-secret"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	revoked := s.watchRevocation(ctx, cancel, r, wire.OpReceive, "jobs")
	if err := revoked(); err != nil {
		t.Fatalf("not revoked: %v", err)
	}
	delete(keys, "k")
	if err := revoked(); !errors.Is(err, ErrInvalidClientTokenID) {
		t.Fatalf("revoked key: %v", err)
	}
	open := s.watchRevocation(ctx, cancel, &request{}, wire.OpReceive, "jobs")
	if err := open(); err != nil {
		t.Fatalf("no token: %v", err)
	}
}
