package client

import (
	"context"
	"errors"

	"github.com/ferrymq/ferry/wire"
)

// maxRedirects bounds the not-leader redirects one attempt follows before
// it backs off.
const maxRedirects = 3

// route says where a request goes and learns from failures.
type route interface {
	// resolve returns the address to send to.
	resolve(ctx context.Context) (string, error)
	// redirect records that from is not the leader and to is.
	redirect(from, to string)
	// failed records that addr could not serve the request (connection
	// lost, not leader with no hint, unavailable).
	failed(addr string)
}

// partRoute sends to the leader of one partition of a queue.
type partRoute struct {
	c     *Client
	queue string
	part  int
}

func (r partRoute) resolve(ctx context.Context) (string, error) {
	return r.c.leaderOf(ctx, r.queue, r.part)
}

func (r partRoute) redirect(from, to string) { r.c.setLeader(r.queue, r.part, to, from) }

func (r partRoute) failed(addr string) { r.c.setLeader(r.queue, r.part, "", addr) }

// nodeRoute sends to the meta leader when it is known, else to any node
// (each failure moves on to the next known address). Catalog reads may be
// answered by any node; catalog changes are redirected to the meta leader.
type nodeRoute struct{ c *Client }

func (r nodeRoute) resolve(context.Context) (string, error) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if r.c.closed {
		return "", ErrClosed
	}
	return r.c.meta.anyAddr(), nil
}

func (r nodeRoute) redirect(_, to string) {
	r.c.mu.Lock()
	r.c.meta.metaLeader = to
	r.c.mu.Unlock()
}

func (r nodeRoute) failed(addr string) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	m := &r.c.meta
	if m.metaLeader == addr {
		m.metaLeader = ""
	}
	if m.addrs[m.anyNext%len(m.addrs)] == addr {
		m.anyNext = (m.anyNext + 1) % len(m.addrs)
	}
}

// class sorts the outcome of one attempt.
type class int

const (
	// classDone: an answer to act on (success or a final refusal), or a
	// failure that retrying cannot fix.
	classDone class = iota
	// classRetry: nothing was done; the request may be sent again.
	classRetry
	// classAmbiguous: the request may have taken effect.
	classAmbiguous
)

// classify sorts an error that prevented an answer. Failures met while
// finding the route are never ambiguous: the request itself was not sent.
func classify(err error, resolving bool) class {
	var te *transportError
	var we *wire.Error
	switch {
	case errors.As(err, &te):
		switch {
		case te.sent && !resolving:
			return classAmbiguous
		case errors.Is(te.err, ErrClosed):
			return classDone
		}
		return classRetry // the caller's own context is checked by callRetry
	case errors.Is(err, ErrClosed) || isContextErr(err):
		return classDone
	case errors.As(err, &we):
		switch we.Code {
		case wire.CodeNotLeader, wire.CodeUnavailable, wire.CodeTooManyConnections:
			return classRetry
		case wire.CodeTimeout:
			if resolving {
				return classRetry
			}
			return classAmbiguous
		}
	}
	return classDone
}

// callOnce makes one attempt at a request, following up to maxRedirects
// not-leader redirects. For classDone with a nil error, resp is the
// server's answer, whose code may still be a refusal (not routing-related).
// For the other classes err describes what went wrong.
func (c *Client) callOnce(ctx context.Context, rt route, op wire.Op, body any) (wire.Response, class, error) {
	var last error
	for hop := 0; hop <= maxRedirects; hop++ {
		addr, err := rt.resolve(ctx)
		if err != nil {
			return wire.Response{}, classify(err, true), err
		}
		cn, err := c.getConn(ctx, addr)
		if err != nil {
			rt.failed(addr)
			return wire.Response{}, classify(err, true), err
		}
		resp, err := cn.roundTrip(ctx, op, body)
		if err != nil {
			cl := classify(err, false)
			if cl != classDone {
				rt.failed(addr)
			}
			return wire.Response{}, cl, err
		}
		switch resp.Code {
		case wire.CodeNotLeader:
			last = resp.Err()
			if resp.Leader != "" && resp.Leader != addr {
				c.log.Debug("ferry: redirected", "op", op, "from", addr, "to", resp.Leader)
				rt.redirect(addr, resp.Leader)
				continue
			}
			rt.failed(addr)
			return resp, classRetry, last
		case wire.CodeUnavailable:
			rt.failed(addr)
			return resp, classRetry, resp.Err()
		case wire.CodeTimeout:
			return resp, classAmbiguous, resp.Err()
		case wire.CodeQueueNotFound:
			if pr, ok := rt.(partRoute); ok {
				c.forgetQueue(pr.queue) // deleted (maybe re-created): reload next time
			}
		}
		return resp, classDone, nil
	}
	return wire.Response{}, classRetry, last
}

// callRetry repeats a request until it gets an answer, backing off between
// attempts, until ctx is done or the client closes. amb reports whether
// any attempt may have taken effect. err is set when no answer came: then
// it wraps the reason for stopping and the last failure (never
// ErrUnconfirmed: the caller decides with amb).
func (c *Client) callRetry(ctx context.Context, rt route, op wire.Op, body any) (resp wire.Response, amb bool, err error) {
	var last error // the last failure that is not the context's
	for attempt := 0; ; attempt++ {
		resp, cl, err := c.callOnce(ctx, rt, op, body)
		if err != nil && !isContextErr(err) {
			last = err
		}
		switch cl {
		case classDone:
			if err != nil && isContextErr(err) {
				err = gaveUp(err, last)
			}
			return resp, amb, err
		case classAmbiguous:
			amb = true
		}
		c.log.Debug("ferry: retrying", "op", op, "attempt", attempt+1, "err", err)
		if serr := c.sleep(ctx, attempt); serr != nil {
			if last == nil {
				last = err
			}
			return wire.Response{}, amb, gaveUp(serr, last)
		}
	}
}

// callAnyNode sends a catalog request to the nodes one after the other
// (meta leader first when known), without backing off, until one answers.
func (c *Client) callAnyNode(ctx context.Context, op wire.Op, body any) (wire.Response, error) {
	c.mu.Lock()
	tries := len(c.meta.addrs) + 1
	c.mu.Unlock()
	var last error
	for i := 0; i < tries; i++ {
		resp, cl, err := c.callOnce(ctx, nodeRoute{c}, op, body)
		if cl == classDone {
			return resp, err
		}
		last = err
	}
	return wire.Response{}, last
}

// call is callRetry for requests whose repetition is harmless or rare
// (catalog operations): it returns the answer's refusal as the error, and
// marks a failure that followed a possibly applied attempt as
// ErrUnconfirmed.
func (c *Client) call(ctx context.Context, rt route, op wire.Op, body, out any) error {
	resp, amb, err := c.callRetry(ctx, rt, op, body)
	if err == nil {
		err = resp.Decode(out)
	}
	if err != nil && amb {
		return unconfirmed(err)
	}
	return err
}

// partitions returns the partition count of a queue, retrying transient
// failures to load the metadata until ctx is done.
func (c *Client) partitions(ctx context.Context, queue string) (int, error) {
	for attempt := 0; ; attempt++ {
		n, err := c.partitionCount(ctx, queue)
		if err == nil {
			return n, nil
		}
		if classify(err, true) != classRetry {
			return 0, err
		}
		if serr := c.sleep(ctx, attempt); serr != nil {
			return 0, gaveUp(serr, err)
		}
	}
}
