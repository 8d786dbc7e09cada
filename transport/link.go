package transport

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/internal/deadline"
)

// connBufferBytes sizes the buffered reader and writer of a shared
// connection: there are a handful per peer, not one set per group.
const connBufferBytes = 256 << 10

// peer is one remote node as seen by the dialing side: its control and
// bulk connections (dialed on first use, dialed again after a failure),
// its heartbeat coalescer and its snapshot slots.
type peer struct {
	s     *Shared
	addr  string
	hb    *heartbeats
	snaps chan struct{} // a slot per snapshot being sent
	live  liveness

	mu      sync.Mutex
	closed  bool
	links   [numClasses]*link
	dialing [numClasses]chan struct{} // closed when the dial in progress ends
	failAt  [numClasses]time.Time
	failErr [numClasses]error
}

func newPeer(s *Shared, addr string) *peer {
	p := &peer{s: s, addr: addr, snaps: make(chan struct{}, s.cfg.MaxSnapshotsPerPeer)}
	p.hb = newHeartbeats(p)
	return p
}

// link returns the open connection of a class, dialing it if needed. One
// dial runs at a time per class; callers arriving meanwhile wait for it,
// and a failed dial is reported to every caller for RedialAfter.
func (p *peer) link(class byte) (*link, error) {
	deadline := time.Now().Add(p.s.cfg.Timeout)
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrMuxClosed
		}
		if l := p.links[class]; l != nil {
			p.mu.Unlock()
			return l, nil
		}
		if wait := p.dialing[class]; wait != nil {
			p.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-time.After(time.Until(deadline)):
				return nil, fmt.Errorf("%w: waiting for the connection to %s", ErrTimeout, p.addr)
			}
		}
		if err := p.failErr[class]; err != nil && time.Since(p.failAt[class]) < p.s.cfg.RedialAfter {
			p.mu.Unlock()
			return nil, err
		}
		done := make(chan struct{})
		p.dialing[class] = done
		p.mu.Unlock()
		l, err := p.dial(class)
		p.mu.Lock()
		p.dialing[class] = nil
		close(done)
		if err != nil {
			p.failAt[class], p.failErr[class] = time.Now(), err
			p.mu.Unlock()
			return nil, err
		}
		p.failErr[class] = nil
		if p.closed {
			p.mu.Unlock()
			l.fail(ErrMuxClosed)
			return nil, ErrMuxClosed
		}
		p.links[class] = l
		p.mu.Unlock()
		p.s.wg.Add(1)
		go func() {
			defer p.s.wg.Done()
			l.readReplies()
		}()
		return l, nil
	}
}

// dial sets up a new connection of a class to the peer.
func (p *peer) dial(class byte) (*link, error) {
	conn, raw, err := p.s.mux.dial(p.addr, p.s.cfg.Timeout, appendSharedHeader(nil, class))
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	return newLink(p, class, conn, raw), nil
}

// dropLink forgets l if it is still the peer's connection of its class.
func (p *peer) dropLink(l *link) {
	p.mu.Lock()
	if p.links[l.class] == l {
		p.links[l.class] = nil
	}
	p.mu.Unlock()
}

// openLinks counts the peer's open connections.
func (p *peer) openLinks() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.links {
		if l != nil {
			n++
		}
	}
	return n + len(p.snaps)
}

// expire fails the calls of the peer's connections past their deadline.
func (p *peer) expire(now time.Time) {
	p.mu.Lock()
	links := p.links
	p.mu.Unlock()
	for _, l := range links {
		if l != nil {
			l.expire(now)
		}
	}
}

// close closes the peer's connections, failing their calls with err.
func (p *peer) close(err error) {
	p.mu.Lock()
	p.closed = true
	links := p.links
	p.links = [numClasses]*link{}
	p.mu.Unlock()
	for _, l := range links {
		if l != nil {
			l.fail(err)
		}
	}
}

// call is one RPC in flight on a link. done is closed once kind and
// payload (the answer) or err are set; then ended, if set, is called on
// the goroutine that ended the call (the link's reader, or whoever failed
// the link). ended must not block.
type call struct {
	deadline time.Time
	done     chan struct{}
	ended    func()
	kind     byte
	payload  []byte
	err      error
}

// end marks the call done and tells its ended function.
func (c *call) end() {
	close(c.done)
	if c.ended != nil {
		c.ended()
	}
}

// result returns the answer's payload, or the error: the call's own, or
// the message of a kindError answer wrapped in ErrRemote.
func (c *call) result() ([]byte, error) {
	<-c.done
	if c.err != nil {
		return nil, c.err
	}
	if c.kind == kindError {
		return nil, fmt.Errorf("%w: %s", ErrRemote, c.payload)
	}
	return c.payload, nil
}

// link is a dialed shared connection: requests go out, answers come back
// matched by id, in any order.
type link struct {
	peer  *peer
	class byte
	conn  net.Conn // TLS over raw, or raw
	raw   net.Conn
	r     *bufio.Reader

	wmu     sync.Mutex
	wdl     deadline.Writer // the write deadline; under wmu
	w       *bufio.Writer
	writers atomic.Int32 // callers waiting for or holding wmu

	mu    sync.Mutex
	calls map[uint64]*call
	next  uint64
	err   error // set once the link failed
}

func newLink(p *peer, class byte, conn, raw net.Conn) *link {
	return &link{
		peer: p, class: class, conn: conn, raw: raw,
		r:     bufio.NewReaderSize(conn, connBufferBytes),
		w:     bufio.NewWriterSize(conn, connBufferBytes),
		calls: make(map[uint64]*call),
	}
}

// start registers a new call and returns it with its id; ended, if not
// nil, is called once the call is done (see call).
func (l *link) start(ended func()) (*call, uint64, error) {
	c := &call{deadline: time.Now().Add(l.peer.s.cfg.Timeout), done: make(chan struct{}), ended: ended}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, 0, l.err
	}
	if len(l.calls) >= l.peer.s.cfg.MaxCallsPerConn {
		return nil, 0, fmt.Errorf("%w: %d RPCs in flight to %s", ErrBusy, len(l.calls), l.peer.addr)
	}
	l.next++
	l.calls[l.next] = c
	return c, l.next, nil
}

// send writes a frame; frames written while others wait are flushed by
// the last writer, so a burst leaves in few writes. A write error fails
// the link.
func (l *link) send(b []byte) error {
	l.writers.Add(1)
	l.wmu.Lock()
	l.writers.Add(-1)
	defer l.wmu.Unlock()
	if err := l.failed(); err != nil {
		return err
	}
	err := l.wdl.Arm(l.conn, time.Now(), l.peer.s.cfg.Timeout)
	if err == nil {
		_, err = l.w.Write(b)
	}
	if err == nil && l.writers.Load() == 0 {
		err = l.w.Flush()
	}
	if err != nil {
		err = fmt.Errorf("%w: write to %s: %w", ErrConnLost, l.peer.addr, err)
		l.fail(err)
	}
	return err
}

// roundTrip sends a request frame built by build (given the call's id) and
// waits for its answer.
func (l *link) roundTrip(build func(id uint64) []byte) ([]byte, error) {
	c, id, err := l.start(nil)
	if err != nil {
		return nil, err
	}
	if err := l.send(build(id)); err != nil {
		l.finish(id, nil, err)
	}
	return c.result()
}

// finish completes the call of id, if it is still in flight, with an
// answer frame or an error.
func (l *link) finish(id uint64, f *frame, err error) {
	l.mu.Lock()
	c := l.calls[id]
	delete(l.calls, id)
	l.mu.Unlock()
	if c == nil {
		return // expired, or an answer to nothing: dropped
	}
	if f != nil {
		c.kind, c.payload = f.kind, f.payload
	} else {
		c.err = err
	}
	c.end()
}

// readReplies reads answers until the connection fails.
func (l *link) readReplies() {
	for {
		f, err := readFrame(l.r, l.peer.s.cfg.MaxFrameBytes)
		if err == nil && f.kind != kindReply && f.kind != kindError {
			err = fmt.Errorf("%w: frame kind %d where answers are expected", ErrBadFrame, f.kind)
		}
		if err != nil {
			l.fail(fmt.Errorf("%w: read from %s: %w", ErrConnLost, l.peer.addr, err))
			return
		}
		l.peer.answered(time.Now()) // any answer shows the node is up
		l.finish(f.id, &f, nil)
	}
}

// failed returns the link's error once it has failed.
func (l *link) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// fail closes the link and fails every call in flight on it (only those:
// other connections are untouched). The peer dials again on next use.
func (l *link) fail(err error) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = err
	calls := l.calls
	l.calls = nil
	l.mu.Unlock()
	l.peer.dropLink(l)
	if l.class == classControl {
		l.peer.lostLiveness()
	}
	_ = l.raw.Close()
	for _, c := range calls {
		c.err = err
		c.end()
	}
}

// expire fails the link when a call is past its deadline. The peer
// answers every request within about half of Timeout, even for a stuck
// group (ErrBusy), so a call without an answer by then means the
// connection is dead or hopelessly slow (a partition drops packets and TCP
// does not notice): every call on it fails, and the next RPC dials again.
func (l *link) expire(now time.Time) {
	l.mu.Lock()
	late := false
	for _, c := range l.calls {
		if now.After(c.deadline) {
			late = true
			break
		}
	}
	l.mu.Unlock()
	if late {
		l.fail(fmt.Errorf("%w: no answer from %s within %v", ErrTimeout, l.peer.addr, l.peer.s.cfg.Timeout))
	}
}
