package node

import (
	"context"
	"sync"

	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/wire"
)

// requestWorkers runs one connection's requests on reused goroutines: a
// request goes to an idle worker when there is one, else to a new worker
// while fewer than connRequestsMax exist, else it waits for a worker (the
// reader then stops reading: backpressure). Workers live as long as the
// connection, so their stacks, grown once, are not grown again per
// request.
type requestWorkers struct {
	handle  func(connRequest)
	reqs    chan connRequest // unbuffered: a send succeeds only into a worker's hands
	workers int              // started so far; only the reader goroutine touches it
	wg      sync.WaitGroup
}

// newRequestWorkers returns an idle pool that runs handle for each
// request; workers start on demand.
func newRequestWorkers(handle func(connRequest)) *requestWorkers {
	return &requestWorkers{handle: handle, reqs: make(chan connRequest)}
}

// connRequest is one decoded request with the connection's token as the
// reader resolved it just before (nil when auth is off), or why the token
// no longer holds.
type connRequest struct {
	// ctx bounds the request (requestTimeoutMax); deadline is released
	// once the request is answered.
	ctx      context.Context
	deadline *deadlineBucket
	req      wire.Request
	tok      *auth.Token
	authErr  error
}

// run hands req to a worker, starting one if none is idle and the limit
// allows; otherwise it blocks until a worker is free.
func (w *requestWorkers) run(req connRequest) {
	select {
	case w.reqs <- req:
		return
	default:
	}
	if w.workers < connRequestsMax {
		w.workers++
		w.wg.Add(1)
		go w.work(req)
		return
	}
	w.reqs <- req
}

// work handles first, then whatever comes until the connection ends.
func (w *requestWorkers) work(first connRequest) {
	defer w.wg.Done()
	w.handle(first)
	for req := range w.reqs {
		w.handle(req)
	}
}

// close ends the workers once their requests are done, and waits for them.
func (w *requestWorkers) close() {
	close(w.reqs)
	w.wg.Wait()
}
