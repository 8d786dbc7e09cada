package client

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"github.com/ferrymq/ferry/wire"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client is a connection to a Ferry cluster. It keeps one multiplexed
// connection per server it talks to, a cache of where each queue partition
// is led, and the Queue handles it gave out. A Client is safe for concurrent
// use by many goroutines; create one per process and Close it when done.
type Client struct {
	cfg      config
	log      *slog.Logger
	consumer string // default consumer id of receives

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // reader goroutines and background goroutines
	// background hands work to a background goroutine waiting for it
	// (unbuffered: a send succeeds only into a waiting goroutine's hands).
	background chan func()
	// backgroundStarted counts the background goroutines started;
	// backgroundWaiting those waiting for work now.
	backgroundStarted atomic.Int64
	backgroundWaiting atomic.Int32

	mu      sync.Mutex
	closed  bool
	conns   map[string]*connSlot
	queues  map[string]*Queue
	meta    metaCache
	flights map[string]*flight
}

// connSlot holds the connection to one address, or the dial in progress.
type connSlot struct {
	ready chan struct{} // closed when the dial finished
	c     *conn
	err   error
}

// Dial connects to the cluster: it tries the seeds in order until one
// accepts a connection and the handshake, then loads the cluster metadata
// from it. Seeds are client protocol addresses ("host:port") of any
// nodes; the client learns the others from the metadata. ctx bounds the
// whole of Dial, and each attempt is also bounded by the dial timeout.
//
//	c, err := client.Dial(ctx, []string{"10.0.0.1:7101", "10.0.0.2:7101"},
//		client.WithClientName("billing"))
//	if err != nil {
//		return err
//	}
//	defer c.Close()
func Dial(ctx context.Context, seeds []string, opts ...Option) (*Client, error) {
	if len(seeds) == 0 {
		return nil, invalidArg("no seed addresses")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	c := &Client{
		cfg:      cfg,
		log:      cfg.logger,
		consumer: truncate(cfg.name, 200) + "-" + randomHex(4),
		conns:    make(map[string]*connSlot),
		queues:   make(map[string]*Queue),
		flights:  make(map[string]*flight),

		background: make(chan func()),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.meta.init(seeds)
	var errs []error
	var texts []string
	for i, addr := range seeds {
		err := c.start(ctx, i, addr)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		var te *transportError
		if errors.As(err, &te) && te.addr == addr {
			texts = append(texts, bare(err)) // names the address already
		} else {
			texts = append(texts, addr+": "+bare(err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	c.Close()
	return nil, &wrapError{text: "ferry: cannot start from any seed: " + strings.Join(texts, "; "), errs: errs}
}

// start connects to seed i and loads the cluster metadata from it.
func (c *Client) start(ctx context.Context, i int, addr string) error {
	if _, err := c.getConn(ctx, addr); err != nil {
		return err
	}
	c.mu.Lock()
	c.meta.anyNext = i
	c.mu.Unlock()
	md, err := c.fetchMetadata(ctx, "")
	if err != nil {
		return wrapText("load metadata", err)
	}
	c.mu.Lock()
	c.meta.merge(md, "")
	c.mu.Unlock()
	return nil
}

// Close closes every connection and stops the client's background work.
// Calls in progress fail (with ErrClosed or a connection error); later calls
// fail with ErrClosed. Leases buffered by Receive, which no caller has
// seen, are first released (for at most a second), without counting the
// attempt. Leases held by deliveries that were returned but not yet
// settled are not given back: they expire on the server and the messages
// are delivered again. Close returns when the client's goroutines have
// ended. It is safe to call more than once.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.wg.Wait()
		return nil
	}
	queues := make([]*Queue, 0, len(c.queues))
	for _, q := range c.queues {
		queues = append(queues, q)
	}
	c.mu.Unlock()
	for _, q := range queues {
		q.releaseWait(q.drainBuffer(), closeReleaseTimeout)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.wg.Wait()
		return nil
	}
	c.closed = true
	slots := c.conns
	c.conns = map[string]*connSlot{}
	c.mu.Unlock()
	c.cancel()
	for _, s := range slots {
		<-s.ready
		if s.c != nil {
			s.c.close()
		}
	}
	c.wg.Wait()
	return nil
}

// Queue returns the handle of the named queue. It does not check that the
// queue exists (the first call on it does). The same name always gives the
// same handle, which holds the queue's receive buffer (see Receive).
//
//	orders := c.Queue("orders")
func (c *Client) Queue(name string) *Queue {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[name]
	if q == nil {
		q = &Queue{c: c, name: name}
		c.queues[name] = q
	}
	return q
}

// backgroundIdle is how long a background goroutine waits for more work
// before it ends (see goBackground).
const backgroundIdle = 5 * time.Second

// goBackground runs f in a goroutine that Close waits for; it reports
// false (and does not run f) when the client is closed.
//
// The goroutines are reused: f goes to one that finished its last work
// and waits for more (for backgroundIdle), else to a new one. A receive or
// a shared send grows its goroutine's stack through the call, decoding and
// retry frames; on a fresh goroutine per call that growth (runtime
// newstack and copystack) was 3% of a bench client's CPU under pipelined
// sends and 6% under Consume.
func (c *Client) goBackground(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	select {
	case c.background <- f: // a waiting goroutine took it
		return true
	default:
	}
	c.wg.Add(1)
	c.backgroundStarted.Add(1)
	go c.runBackground(f)
	return true
}

// runBackground runs f, then whatever goBackground hands it, until it has
// waited backgroundIdle for work or the client closes.
func (c *Client) runBackground(f func()) {
	defer c.wg.Done()
	idle := time.NewTimer(backgroundIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(backgroundIdle)
		c.backgroundWaiting.Add(1)
		select {
		case f = <-c.background:
			c.backgroundWaiting.Add(-1)
		case <-idle.C:
			c.backgroundWaiting.Add(-1)
			return
		case <-c.ctx.Done():
			c.backgroundWaiting.Add(-1)
			return
		}
	}
}

// getConn returns a live connection to addr, dialing one if needed.
// Concurrent callers share one dial and its outcome.
func (c *Client) getConn(ctx context.Context, addr string) (*conn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		s := c.conns[addr]
		if s == nil {
			s = &connSlot{ready: make(chan struct{})}
			c.conns[addr] = s
			c.mu.Unlock()
			s.c, s.err = c.dial(ctx, addr)
			if s.err != nil {
				c.dropSlot(addr, s)
			}
			close(s.ready)
			return s.c, s.err
		}
		c.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		if s.err != nil {
			if isContextErr(s.err) && ctx.Err() == nil {
				continue // the dialing caller gave up; dial for ourselves
			}
			return nil, s.err
		}
		if s.c.alive() {
			return s.c, nil
		}
		c.dropSlot(addr, s) // dead: the next round dials again
	}
}

// dropSlot forgets s if it is still addr's slot.
func (c *Client) dropSlot(addr string, s *connSlot) {
	c.mu.Lock()
	if c.conns[addr] == s {
		delete(c.conns, addr)
	}
	c.mu.Unlock()
}

// dial opens a connection for getConn.
func (c *Client) dial(ctx context.Context, addr string) (*conn, error) {
	hello := wire.NewHello(software + " " + c.cfg.name)
	hello.Token = c.cfg.token
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel) // Close interrupts dials
	defer stop()
	cn, err := dialConn(ctx, addr, hello, c.cfg.dialTimeout, c.cfg.tls, c.log, c.goBackground)
	if err != nil {
		c.log.Debug("ferry: dial failed", "addr", addr, "err", err)
		if ctx.Err() == nil && isContextErr(err) {
			// A dial or handshake timeout is the address's failure, not
			// the caller's deadline: do not let it match one.
			err = errors.New(err.Error())
		}
		if errors.Is(err, ErrUnauthorized) {
			// A refused token is final, not a connection failure to
			// retry.
			return nil, wrapText("ferry", err)
		}
		return nil, &transportError{addr: addr, err: err}
	}
	c.log.Debug("ferry: connected", "addr", addr)
	return cn, nil
}

// backoff returns the pause before retry number attempt (0-based): an
// exponential step between the configured bounds, jittered to 50-100 %.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.backoffMin
	for i := 0; i < attempt && d < c.cfg.backoffMax; i++ {
		d *= 2
	}
	d = min(d, c.cfg.backoffMax)
	return d/2 + rand.N(d/2+1)
}

// sleep waits before retry number attempt; it returns early with the
// context's cause or ErrClosed.
func (c *Client) sleep(ctx context.Context, attempt int) error {
	t := time.NewTimer(c.backoff(attempt))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-c.ctx.Done():
		return ErrClosed
	}
}

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}
