package sqs

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/wire"
)

// Reloader is implemented by Credentials whose keys can change while
// requests run (a reload of a node's tokens file). The server ends the
// long polls of a key at the reload that revokes it or takes its
// permission away, instead of at the end of their wait.
type Reloader interface {
	// Reloaded returns a channel closed at the next change, once the
	// new credentials are in force.
	Reloaded() <-chan struct{}
}

// TokenSource is a node's tokens and their reloads (*node.Node is one).
type TokenSource interface {
	// Tokens returns the current tokens.
	Tokens() *auth.Set
	// TokensReloaded returns a channel closed by the next reload, once
	// the new tokens are in force.
	TokensReloaded() <-chan struct{}
}

// NodeCredentials are TokenCredentials of src's tokens that also tell the
// server of every reload (Reloader), as ferryd's endpoint uses.
func NodeCredentials(src TokenSource) Credentials { return nodeCredentials{src} }

type nodeCredentials struct{ src TokenSource }

// Secret implements Credentials.
func (c nodeCredentials) Secret(id string) (string, *auth.Token, bool) {
	return TokenCredentials(c.src.Tokens).Secret(id)
}

// Reloaded implements Reloader.
func (c nodeCredentials) Reloaded() <-chan struct{} { return c.src.TokensReloaded() }

// current reports whether the request's caller may still run op on queue
// under the credentials in force now: its key still known, with the same
// secret, and a token that allows it. A request without a token always
// may.
func (s *Server) current(r *request, op wire.Op, queue string) error {
	if r.tok == nil || s.cfg.Credentials == nil {
		return nil
	}
	secret, tok, ok := s.cfg.Credentials.Secret(r.who.key)
	if !ok || secret != r.who.secret {
		return fail(ErrInvalidClientTokenID, "access key %q was revoked while the request waited", truncate(r.who.key, 64))
	}
	if !tok.Allows(op, queue) {
		return fail(ErrAccessDenied, "access key %q lost its permission on queue %s while the request waited", truncate(r.who.key, 64), truncate(queue, 80))
	}
	return nil
}

// watchRevocation cancels a long-running request's work (cancel) at the
// credential reload that revokes its caller's right to run op on queue.
// The returned function, called when the work is done, gives the error of
// a revocation that happened meanwhile (nil if none), looking at the
// credentials once more: a reload that came just before the work ended is
// not missed.
func (s *Server) watchRevocation(ctx context.Context, cancel context.CancelFunc, r *request, op wire.Op, queue string) func() error {
	var revoked atomic.Pointer[error]
	check := func() bool {
		if err := s.current(r, op, queue); err != nil {
			revoked.Store(&err)
			cancel()
			return true
		}
		return false
	}
	rl, ok := s.cfg.Credentials.(Reloader)
	if ok && r.tok != nil {
		reloaded := rl.Reloaded()
		if !check() { // a reload before the watch began is seen here
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-reloaded:
						reloaded = rl.Reloaded()
						if check() {
							return
						}
					}
				}
			}()
		}
	}
	return func() error {
		if p := revoked.Load(); p != nil {
			return *p
		}
		return s.current(r, op, queue)
	}
}

// release gives back deliveries received for a caller that was revoked
// meanwhile: they are visible again at once for other consumers.
func (s *Server) release(ctx context.Context, ds []*client.Delivery) {
	if len(ds) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	rs := make([]client.Receipt, len(ds))
	for i, d := range ds {
		rs[i] = d.Receipt()
	}
	_ = s.cl.NackReceipts(ctx, rs, client.NackOptions{Immediate: true, Reason: "receiver's access key revoked during the receive"})
}
