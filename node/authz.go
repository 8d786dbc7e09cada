package node

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/internal/tlsconf"
	"github.com/ferrymq/ferry/wire"
)

// tokens is the node's current token set with a generation that changes
// on every reload, so a connection knows when to look its token up again.
type tokens struct {
	set *auth.Set
	gen uint64
}

// tokenStore holds the node's tokens; the zero value has auth off.
type tokenStore struct {
	mu  sync.Mutex // serializes stores, so that generations never repeat
	cur atomic.Pointer[tokens]
	// reloaded is closed (and replaced) by the next store, after the new
	// set is in place; nil until first asked for.
	reloaded chan struct{}
}

// next returns a channel closed at the next store.
func (s *tokenStore) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reloaded == nil {
		s.reloaded = make(chan struct{})
	}
	return s.reloaded
}

// on reports whether the node requires tokens.
func (s *tokenStore) on() bool { return s.cur.Load() != nil }

// load returns the current tokens, nil when auth is off.
func (s *tokenStore) load() *tokens { return s.cur.Load() }

// store installs a set as the next generation.
func (s *tokenStore) store(set *auth.Set) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gen uint64
	if old := s.cur.Load(); old != nil {
		gen = old.gen + 1
	}
	s.cur.Store(&tokens{set: set, gen: gen})
	if s.reloaded != nil {
		close(s.reloaded)
		s.reloaded = nil
	}
}

// SetTokens replaces the node's tokens (a reload of the tokens file, as on
// SIGHUP). Connections look their token up again before their next
// request, so a token removed from the set is refused from then on, and a
// new connection presenting it is refused at the handshake. It fails on a
// node started without tokens (auth off) and for a nil set.
func (n *Node) SetTokens(set *auth.Set) error {
	if set == nil {
		return errors.New("node: nil token set")
	}
	if !n.auth.on() {
		return errors.New("node: started without tokens (auth off); restart it with a tokens file")
	}
	n.auth.store(set)
	n.logger.Info("tokens reloaded", "tokens", set.Len())
	return nil
}

// TokensReloaded returns a channel closed by the next SetTokens, once the
// new set is in force (Tokens returns it): work that runs for a caller's
// token for a while (the SQS endpoint's long polls) looks the token up
// again then.
func (n *Node) TokensReloaded() <-chan struct{} { return n.auth.next() }

// Tokens returns the node's current tokens, nil when auth is off.
func (n *Node) Tokens() *auth.Set {
	if cur := n.auth.load(); cur != nil {
		return cur.set
	}
	return nil
}

// memberToken is the identity of a connection that presented a node
// certificate of the cluster CA: another member of the cluster (the SQS
// endpoint beside a node dials its node this way). The raft port trusts
// the same certificate with the cluster's whole state, so on the client
// port it carries every right too, and is the only identity that reaches
// the reserved queues (auth.Reserved); users get tokens, never node
// certificates.
var memberToken = &auth.Token{Name: "cluster member (node certificate)", ClusterAdmin: true, Internal: true}

// connAuth is the identity of one client connection: the secret it
// presented and the token it resolved to in the generation it last saw,
// or that it is a cluster member. Only the connection's reader goroutine
// uses it.
type connAuth struct {
	store  *tokenStore
	nc     net.Conn
	secret string
	gen    uint64
	tok    *auth.Token
	member bool
}

// checkHello resolves the hello's token: nil when auth is off, the
// connection presented a node certificate or the token is known, a
// CodeUnauthorized error otherwise. The TLS handshake is complete here:
// the hello was read through it.
func (c *connAuth) checkHello(h wire.Hello) error {
	cur := c.store.load()
	if cur == nil {
		return nil
	}
	if tc, ok := c.nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		if len(st.VerifiedChains) > 0 && tlsconf.IsNodeCert(st.PeerCertificates[0]) {
			c.member = true
			return nil
		}
	}
	if h.Token == "" {
		return wire.Errorf(wire.CodeUnauthorized, "this node requires a token (none given)")
	}
	c.secret = h.Token
	c.gen = cur.gen
	tok, ok := cur.set.Lookup(h.Token)
	if !ok {
		return wire.Errorf(wire.CodeUnauthorized, "unknown token")
	}
	c.tok = tok
	return nil
}

// token returns the connection's token under the current set (looking it
// up again after a reload), nil when auth is off, or a CodeUnauthorized
// error when the token was revoked.
func (c *connAuth) token() (*auth.Token, error) {
	cur := c.store.load()
	if cur == nil {
		return nil, nil
	}
	if c.member {
		return memberToken, nil
	}
	if cur.gen != c.gen {
		c.gen = cur.gen
		c.tok, _ = cur.set.Lookup(c.secret)
	}
	if c.tok == nil {
		return nil, wire.Errorf(wire.CodeUnauthorized, "token revoked")
	}
	return c.tok, nil
}

// callerKey keys the name of a request's token in its context.
type callerKey struct{}

// withCaller notes in ctx the name of the token a request came with (nil:
// auth is off, nothing is noted), for the commands that record who asked.
func withCaller(ctx context.Context, tok *auth.Token) context.Context {
	if tok == nil {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, tok.Name)
}

// callerName returns the name withCaller noted, or "".
func callerName(ctx context.Context) string {
	name, _ := ctx.Value(callerKey{}).(string)
	return name
}

// authorize checks a decoded request against the connection's token (see
// authorizeAction); the queue and op come from the request table.
func authorize(tok *auth.Token, in any) error {
	queue, op := requiredAction(in)
	return authorizeAction(tok, queue, op)
}

// authorizeAction checks that tok may do op on queue before anything is
// done for the request; tok nil means auth is off. Listings (metadata
// without a queue, list queues) pass here and are filtered by
// visibleQueues. The permission each op needs is auth's table (OpNeed),
// the one the SQS endpoint checks its actions against too; the reserved
// queues are refused to every token but the cluster's own identity.
func authorizeAction(tok *auth.Token, queue string, op wire.Op) error {
	if tok.Allows(op, queue) {
		return nil
	}
	switch need := auth.OpNeed(op); {
	case need == auth.NeedCluster:
		return wire.Errorf(wire.CodeUnauthorized, "token %q: cluster admin permission needed", tok.Name)
	case auth.Reserved(queue):
		return wire.Errorf(wire.CodeUnauthorized, "queue %q is reserved for the cluster's own use", queue)
	case need == auth.NeedSee:
		return wire.Errorf(wire.CodeUnauthorized, "token %q has no permission on queue %q", tok.Name, queue)
	default:
		return wire.Errorf(wire.CodeUnauthorized, "token %q: %s permission on queue %q needed", tok.Name, need, queue)
	}
}

// requiredAction names the queue a request touches and the op whose
// permission it needs, from the request table's entry for its type.
// Anything without an entry is OpRemoveNode's cluster admin (deny by
// default).
func requiredAction(in any) (string, wire.Op) {
	if rt, ok := routesByBody[reflect.TypeOf(in)]; ok {
		return rt.action(in)
	}
	return "", wire.OpRemoveNode
}

// visibleQueues drops from a listing the queues the token has no
// permission on; a nil token (auth off) sees all, a cluster admin all but
// the reserved ones.
func visibleQueues(tok *auth.Token, qs []wire.QueueInfo) []wire.QueueInfo {
	if tok == nil {
		return qs
	}
	out := qs[:0:0]
	for _, q := range qs {
		if tok.Sees(q.Name) {
			out = append(out, q)
		}
	}
	return out
}
