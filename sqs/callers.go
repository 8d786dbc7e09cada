package sqs

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Defaults of Limits.
const (
	// DefaultMaxCallers is the default Limits.MaxCallers.
	DefaultMaxCallers = 256
	// DefaultMaxCallerRequests is the default Limits.MaxCallerRequests.
	DefaultMaxCallerRequests = 128
	// DefaultMaxCallerLongPolls is the default Limits.MaxCallerLongPolls.
	DefaultMaxCallerLongPolls = 64
	// DefaultCallerIdleTimeout is the default Limits.CallerIdleTimeout.
	DefaultCallerIdleTimeout = 2 * time.Minute
)

// Ranges of Limits, checked by Validate.
const (
	// MaxCallersMax bounds Limits.MaxCallers: every caller may hold a
	// connection to each node, and a node's client port takes at most
	// 1,000 connections from one address by default.
	MaxCallersMax = 900
	// MaxCallerRequestsMax bounds Limits.MaxCallerRequests: a node serves
	// at most 256 requests of one connection at a time, so a caller never
	// waits behind its own requests at the node.
	MaxCallerRequestsMax = 256
	// callerDialTimeout bounds the dial of a caller's connection.
	callerDialTimeout = 10 * time.Second
	// callerKeyBytesMax bounds the access key id kept per caller.
	callerKeyBytesMax = 128
)

// Limits bound what one caller (one access key id; unsigned requests,
// where the server takes them, are one caller together) may have the
// endpoint do at once, so that no caller stalls another. A request over a
// bound is answered at once with ErrRequestThrottled. Zero fields take
// the defaults.
type Limits struct {
	// MaxCallers bounds the callers the server keeps state (and a
	// connection to the cluster) for. When every place is taken, the one
	// idle longest is dropped; when none is idle, a new caller is
	// throttled.
	MaxCallers int
	// MaxCallerRequests bounds one caller's requests in flight.
	MaxCallerRequests int
	// MaxCallerLongPolls bounds how many of them are ReceiveMessage calls
	// (each may wait up to 20 s); at most MaxCallerRequests.
	MaxCallerLongPolls int
	// CallerIdleTimeout is how long a caller with nothing in flight keeps
	// its state and connection.
	CallerIdleTimeout time.Duration
}

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	if l.MaxCallers == 0 {
		l.MaxCallers = DefaultMaxCallers
	}
	if l.MaxCallerRequests == 0 {
		l.MaxCallerRequests = DefaultMaxCallerRequests
	}
	if l.MaxCallerLongPolls == 0 {
		l.MaxCallerLongPolls = min(DefaultMaxCallerLongPolls, l.MaxCallerRequests)
	}
	if l.CallerIdleTimeout == 0 {
		l.CallerIdleTimeout = DefaultCallerIdleTimeout
	}
	return l
}

// Validate reports the first field out of its range (after defaults),
// naming it; the error matches ErrInvalidLimits.
func (l Limits) Validate() error {
	d := l.withDefaults()
	switch {
	case d.MaxCallers < 1 || d.MaxCallers > MaxCallersMax:
		return fmt.Errorf("%w: MaxCallers %d: must be 1..%d (0 = default %d)", ErrInvalidLimits, l.MaxCallers, MaxCallersMax, DefaultMaxCallers)
	case d.MaxCallerRequests < 1 || d.MaxCallerRequests > MaxCallerRequestsMax:
		return fmt.Errorf("%w: MaxCallerRequests %d: must be 1..%d (0 = default %d)", ErrInvalidLimits,
			l.MaxCallerRequests, MaxCallerRequestsMax, DefaultMaxCallerRequests)
	case d.MaxCallerLongPolls < 1 || d.MaxCallerLongPolls > d.MaxCallerRequests:
		return fmt.Errorf("%w: MaxCallerLongPolls %d: must be 1..MaxCallerRequests (%d)", ErrInvalidLimits,
			l.MaxCallerLongPolls, d.MaxCallerRequests)
	case d.CallerIdleTimeout < time.Second || d.CallerIdleTimeout > time.Hour:
		return fmt.Errorf("%w: CallerIdleTimeout %v: must be 1s..1h (0 = default %v)", ErrInvalidLimits,
			l.CallerIdleTimeout, DefaultCallerIdleTimeout)
	}
	return nil
}

// callerState is one access key's state: its requests in flight and its own
// connection to the cluster.
type callerState struct {
	key             string
	requests, polls int       // in flight (under callers.mu)
	last            time.Time // when the last request ended (under callers.mu)

	dialMu sync.Mutex                    // one dial at a time
	cl     atomic.Pointer[client.Client] // nil until dialled
}

// callers is the server's table of callers, bounded in count; idle ones
// are dropped after Limits.CallerIdleTimeout, and their connections
// closed.
type callers struct {
	lim       Limits
	dial      func(context.Context) (*client.Client, error) // nil: every caller uses shared
	shared    *client.Client
	throttled atomic.Uint64

	mu     sync.Mutex
	table  map[string]*callerState
	sweep  *time.Timer // armed while the table is not empty
	closed bool
	wg     sync.WaitGroup // connections being closed
}

// newCallers returns an empty table; dial nil makes every caller use
// shared.
func newCallers(lim Limits, shared *client.Client, dial func(context.Context) (*client.Client, error)) *callers {
	return &callers{lim: lim.withDefaults(), dial: dial, shared: shared, table: make(map[string]*callerState)}
}

// admit counts a request of key in flight (a long poll when poll), or
// refuses it with ErrRequestThrottled when key is at a bound.
func (cs *callers) admit(key string, poll bool) (*callerState, error) {
	if len(key) > callerKeyBytesMax {
		key = key[:callerKeyBytesMax]
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, fail(ErrServiceUnavailable, "the endpoint is shutting down")
	}
	c := cs.table[key]
	if c == nil {
		if len(cs.table) >= cs.lim.MaxCallers && !cs.dropIdlest() {
			cs.throttled.Add(1)
			return nil, fail(ErrRequestThrottled, "the endpoint serves %d callers with requests in flight, its limit; retry later",
				cs.lim.MaxCallers)
		}
		c = &callerState{key: key}
		cs.table[key] = c
		if cs.sweep == nil {
			cs.sweep = time.AfterFunc(cs.sweepEvery(), cs.dropIdle)
		}
	}
	switch {
	case c.requests >= cs.lim.MaxCallerRequests:
		cs.throttled.Add(1)
		return nil, fail(ErrRequestThrottled, "access key %q has %d requests in flight, its limit; retry later",
			truncate(key, 64), cs.lim.MaxCallerRequests)
	case poll && c.polls >= cs.lim.MaxCallerLongPolls:
		cs.throttled.Add(1)
		return nil, fail(ErrRequestThrottled, "access key %q has %d ReceiveMessage calls in flight, its limit; retry later",
			truncate(key, 64), cs.lim.MaxCallerLongPolls)
	}
	c.requests++
	if poll {
		c.polls++
	}
	return c, nil
}

// release counts a request of c ended.
func (cs *callers) release(c *callerState, poll bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c.requests--
	if poll {
		c.polls--
	}
	c.last = time.Now()
}

// client returns c's own connection, dialling it on first use; the shared
// one when the server has no dial function. Call it only while a request
// of c is admitted.
func (cs *callers) client(ctx context.Context, c *callerState) (*client.Client, error) {
	if cs.dial == nil {
		return cs.shared, nil
	}
	if cl := c.cl.Load(); cl != nil {
		return cl, nil
	}
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	if cl := c.cl.Load(); cl != nil {
		return cl, nil
	}
	dctx, cancel := context.WithTimeout(ctx, callerDialTimeout)
	defer cancel()
	cl, err := cs.dial(dctx)
	if err != nil {
		return nil, fail(ErrServiceUnavailable, "connecting to the cluster: %v", err)
	}
	cs.mu.Lock()
	closed := cs.closed
	if !closed {
		c.cl.Store(cl)
	}
	cs.mu.Unlock()
	if closed {
		_ = cl.Close()
		return nil, fail(ErrServiceUnavailable, "the endpoint is shutting down")
	}
	return cl, nil
}

// dropIdlest drops the caller idle longest, reporting whether there was
// one with nothing in flight. cs.mu is held.
func (cs *callers) dropIdlest() bool {
	var idlest *callerState
	for _, c := range cs.table {
		if c.requests == 0 && (idlest == nil || c.last.Before(idlest.last)) {
			idlest = c
		}
	}
	if idlest == nil {
		return false
	}
	cs.drop(idlest)
	return true
}

// drop removes c from the table and closes its connection in the
// background. cs.mu is held.
func (cs *callers) drop(c *callerState) {
	delete(cs.table, c.key)
	if cl := c.cl.Swap(nil); cl != nil {
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			_ = cl.Close()
		}()
	}
}

// sweepEvery is the period of the idle sweep.
func (cs *callers) sweepEvery() time.Duration {
	return max(cs.lim.CallerIdleTimeout/4, 10*time.Millisecond)
}

// dropIdle drops the callers idle for CallerIdleTimeout, and arms the
// next sweep while any remain.
func (cs *callers) dropIdle() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return
	}
	now := time.Now()
	for _, c := range cs.table {
		if c.requests == 0 && now.Sub(c.last) >= cs.lim.CallerIdleTimeout {
			cs.drop(c)
		}
	}
	if len(cs.table) == 0 {
		cs.sweep = nil
		return
	}
	cs.sweep.Reset(cs.sweepEvery())
}

// count returns the callers in the table.
func (cs *callers) count() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.table)
}

// close drops every caller and waits for their connections to close;
// requests still in flight fail, later ones are refused.
func (cs *callers) close() {
	cs.mu.Lock()
	cs.closed = true
	if cs.sweep != nil {
		cs.sweep.Stop()
	}
	for _, c := range cs.table {
		cs.drop(c)
	}
	cs.mu.Unlock()
	cs.wg.Wait()
}

// callerKey is the access key id of a request's signature ("" when it has
// none). It is the caller's identity only once the signature was checked.
func callerKey(hr *http.Request) string {
	sig, err := parseAuthorization(hr.Header.Get("Authorization"))
	if err != nil {
		return ""
	}
	return sig.AccessKeyID
}
