package node

import (
	"context"
	"sync/atomic"
	"time"
)

// requestDeadlineStep is how long one connection's requests share a
// deadline context: a request started within a step of the context's
// creation gets its deadline, so its own bound lies between
// requestTimeoutMax-requestDeadlineStep and requestTimeoutMax.
const requestDeadlineStep = time.Second

// requestDeadlines hands the requests of one connection contexts bounded by
// requestTimeoutMax without making one per request: a context with a
// deadline costs a runtime timer and a child registered with its parent,
// which under pipelined load was several percent of a leader's CPU. A
// context is shared by the requests that start within requestDeadlineStep
// of its creation and cancelled as soon as the last of them finishes after
// it has been replaced, so live timers are bounded by the requests in
// flight. Only the connection's reader goroutine calls next; done may be
// called from any goroutine.
//
// Nothing in a handler may rely on its context being cancelled when it
// returns (as a context.AfterFunc registered per request would): a shared
// context stays alive while other requests use it, at most
// requestTimeoutMax.
type requestDeadlines struct {
	parent context.Context
	cur    *deadlineBucket
}

// deadlineBucket is one shared deadline context and its users.
type deadlineBucket struct {
	ctx     context.Context
	cancel  context.CancelFunc
	created time.Time
	// users counts the requests using ctx, plus one while the bucket is
	// current (held by requestDeadlines), so ctx is cancelled only once
	// it is replaced and its last request is done.
	users atomic.Int64
}

// newRequestDeadlines returns the deadline source of a connection whose
// context is parent.
func newRequestDeadlines(parent context.Context) *requestDeadlines {
	return &requestDeadlines{parent: parent}
}

// next returns the context for a request starting at now, and the bucket
// to hand to done when the request has finished.
func (d *requestDeadlines) next(now time.Time) (context.Context, *deadlineBucket) {
	if d.cur == nil || now.Sub(d.cur.created) >= requestDeadlineStep || now.Before(d.cur.created) {
		d.replace(now)
	}
	d.cur.users.Add(1)
	return d.cur.ctx, d.cur
}

// replace retires the current bucket and makes a new one starting at now.
func (d *requestDeadlines) replace(now time.Time) {
	if d.cur != nil {
		d.cur.release()
	}
	ctx, cancel := context.WithDeadline(d.parent, now.Add(requestTimeoutMax))
	b := &deadlineBucket{ctx: ctx, cancel: cancel, created: now}
	b.users.Store(1)
	d.cur = b
}

// close retires the current bucket; requests still using it keep it until
// they are done.
func (d *requestDeadlines) close() {
	if d.cur != nil {
		d.cur.release()
		d.cur = nil
	}
}

// release drops one user; the last one cancels the context, freeing its
// timer.
func (b *deadlineBucket) release() {
	n := b.users.Add(-1)
	if n < 0 {
		panic("node: deadline bucket released more often than taken")
	}
	if n == 0 {
		b.cancel()
	}
}
