package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/wire"
)

// countConn is a net.Conn that records the Write calls passed on to it.
type countConn struct {
	net.Conn
	gate    func(frames int) // when set, runs before a Write is passed on
	started atomic.Int64     // Write calls begun
	mu      sync.Mutex
	writes  []writeRec
}

// writeRec describes one Write call: the frames it carried and its length.
type writeRec struct{ frames, bytes int }

// Write records p, runs the gate and passes p on.
func (cc *countConn) Write(p []byte) (int, error) {
	cc.mu.Lock()
	cc.writes = append(cc.writes, writeRec{frames: countFrames(p), bytes: len(p)})
	cc.mu.Unlock()
	cc.started.Add(1)
	if cc.gate != nil {
		cc.gate(countFrames(p))
	}
	return cc.Conn.Write(p)
}

// recorded returns a copy of the Write calls so far.
func (cc *countConn) recorded() []writeRec {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return append([]writeRec(nil), cc.writes...)
}

// countFrames counts the frames in p, which holds whole frames.
func countFrames(p []byte) int {
	n := 0
	for len(p) >= 4 {
		p = p[min(len(p), 4+int(binary.BigEndian.Uint32(p))):]
		n++
	}
	return n
}

// newTestConn returns a conn over one end of a net.Pipe (its reader not
// started), the counting wrapper of that end and the other end. Nothing
// reads the other end until the test does: writes block until then.
func newTestConn(t *testing.T) (*conn, *countConn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	cc := &countConn{Conn: a}
	c := newConn("pipe", cc, 0, slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		c.close()
		b.Close()
	})
	return c, cc, b
}

// testReq returns a request with id whose body is size bytes of a
// pattern derived from id.
func testReq(id uint64, size int) wire.Request {
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(id + uint64(i))
	}
	req, err := wire.NewRequest(id, wire.OpSend, body)
	if err != nil {
		panic(err)
	}
	return req
}

// goWrite runs c.write in a goroutine and returns its result channel.
func goWrite(c *conn, ctx context.Context, req wire.Request) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- c.write(ctx, req) }()
	return ch
}

// result waits up to 5 s for the result of a goWrite.
func result(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// queueLen returns the number of frames queued on c.
func queueLen(c *conn) int {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return len(c.queue)
}

// poll reports whether cond came to hold within d. It is for waits off
// the test's goroutine (a write gate), where a failed wait must not end
// the test; the test's own waits use testwait.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
	return true
}

// readReq reads the next frame from peer, unbuffered so that it takes no
// byte of the frames after it; it fails the test after 5 s.
func readReq(t *testing.T, peer net.Conn) wire.Request {
	t.Helper()
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	req, err := wire.NewReader(peer).ReadRequest()
	if err != nil {
		t.Fatalf("peer read: %v", err)
	}
	return req
}

// queueBehind starts writes of reqs with ctx, one after the other once
// the previous one is queued, so they are queued in that order.
func queueBehind(t *testing.T, c *conn, ctx context.Context, reqs ...wire.Request) []<-chan error {
	t.Helper()
	var out []<-chan error
	for _, req := range reqs {
		n := queueLen(c)
		out = append(out, goWrite(c, ctx, req))
		testwait.Until(t, 5*time.Second, fmt.Sprintf("request %d to be queued", req.ID),
			func() bool { return queueLen(c) == n+1 })
	}
	return out
}

// blockedWrite starts a write of req that blocks in the pipe (the peer
// not reading) and waits for it to be in Write.
func blockedWrite(t *testing.T, c *conn, cc *countConn, ctx context.Context, req wire.Request) <-chan error {
	t.Helper()
	n := cc.started.Load()
	ch := goWrite(c, ctx, req)
	testwait.Until(t, 5*time.Second, "the write to start", func() bool { return cc.started.Load() == n+1 })
	return ch
}

func TestConnWrite_ConcurrentFramesLeaveTogether(t *testing.T) {
	const senders, each = 64, 16
	c, cc, peer := newTestConn(t)
	// Each Write waits until every sender with frames left has one queued
	// or in that Write, so the next flush finds all that can be queued,
	// whatever the scheduling: two successive writes carry a frame of every
	// sender, and about 2*each writes carry everything.
	var active atomic.Int64
	active.Store(senders)
	cc.gate = func(frames int) {
		poll(5*time.Second, func() bool { return queueLen(c)+frames >= int(active.Load()) })
	}
	got := make(chan []uint64, 1)
	go func() {
		_ = peer.SetReadDeadline(time.Now().Add(30 * time.Second))
		rd := wire.NewReader(bufio.NewReader(peer))
		var ids []uint64
		for range senders * each {
			req, err := rd.ReadRequest()
			if err != nil {
				break
			}
			ids = append(ids, req.ID)
		}
		got <- ids
	}()
	errs := make(chan error, senders)
	for g := range senders {
		go func() {
			defer active.Add(-1)
			for i := range each {
				if err := c.write(context.Background(), testReq(uint64(g+1)<<32|uint64(i+1), 20+g)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range senders {
		if err := result(t, errs, "a sender"); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	ids := <-got
	if len(ids) != senders*each {
		t.Fatalf("peer got %d frames, want %d", len(ids), senders*each)
	}
	next := make(map[uint64]uint64)
	for _, id := range ids {
		g, i := id>>32, id&(1<<32-1)
		if i != next[g]+1 {
			t.Fatalf("sender %d: frame %d after %d", g, i, next[g])
		}
		next[g] = i
	}
	writes := cc.recorded()
	t.Logf("%d frames in %d writes", len(ids), len(writes))
	if len(writes) > len(ids)/8 {
		t.Fatalf("%d frames took %d writes, want at most %d", len(ids), len(writes), len(ids)/8)
	}
}

func TestConnWrite_CancelledWhileQueuedIsNotSent(t *testing.T) {
	c, cc, peer := newTestConn(t)
	first := blockedWrite(t, c, cc, context.Background(), testReq(1, 10))
	ctx, cancel := context.WithCancelCause(context.Background())
	errGaveUp := errors.New("gave up")
	queued := queueBehind(t, c, ctx, testReq(2, 10))[0]
	cancel(errGaveUp)
	// It returns at once, while the write ahead of it is still blocked.
	if err := result(t, queued, "the cancelled write"); !errors.Is(err, errGaveUp) {
		t.Fatalf("cancelled write: %v, want its cause", err)
	}
	select {
	case err := <-first:
		t.Fatalf("the blocked write returned %v before the peer read", err)
	default:
	}
	if n := queueLen(c); n != 0 {
		t.Fatalf("%d frames still queued", n)
	}
	if req := readReq(t, peer); req.ID != 1 {
		t.Fatalf("peer got frame %d first, want 1", req.ID)
	}
	if err := result(t, first, "the first write"); err != nil {
		t.Fatalf("first write: %v", err)
	}
	third := goWrite(c, context.Background(), testReq(3, 10))
	if req := readReq(t, peer); req.ID != 3 {
		t.Fatalf("peer got frame %d after 1, want 3 (2 was cancelled)", req.ID)
	}
	if err := result(t, third, "the third write"); err != nil || !c.alive() {
		t.Fatalf("third write: %v (connection alive: %v)", err, c.alive())
	}
}

func TestConnWrite_FlusherCancelBeforeAnyByteKeepsConn(t *testing.T) {
	c, cc, peer := newTestConn(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	errGaveUp := errors.New("gave up")
	flusher := blockedWrite(t, c, cc, ctx, testReq(1, 10))
	others := queueBehind(t, c, context.Background(), testReq(2, 10), testReq(3, 10))
	cancel(errGaveUp)
	if err := result(t, flusher, "the interrupted write"); !errors.Is(err, errGaveUp) {
		t.Fatalf("interrupted write: %v, want its cause", err)
	}
	if !c.alive() {
		t.Fatal("connection failed though nothing was sent")
	}
	// The owners of the frames put back flush them, together, with the
	// deadline cleared.
	for _, want := range []uint64{2, 3} {
		if req := readReq(t, peer); req.ID != want {
			t.Fatalf("peer got frame %d, want %d", req.ID, want)
		}
	}
	for i, ch := range others {
		if err := result(t, ch, "a queued write"); err != nil {
			t.Fatalf("queued write %d: %v", i+2, err)
		}
	}
	if w := cc.recorded(); len(w) != 2 || w[0].frames != 1 || w[1].frames != 2 {
		t.Fatalf("writes %+v, want one of frame 1, then one of frames 2 and 3", w)
	}
	if !c.alive() {
		t.Fatal("connection failed")
	}
}

func TestConnWrite_FlusherCancelAfterPartFailsConn(t *testing.T) {
	c, cc, peer := newTestConn(t)
	ctx, cancel := context.WithCancel(context.Background())
	flusher := blockedWrite(t, c, cc, ctx, testReq(1, 1000))
	queued := queueBehind(t, c, context.Background(), testReq(2, 10))[0]
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := peer.Read(make([]byte, 10)); err != nil {
		t.Fatalf("peer read: %v", err)
	}
	cancel()
	if err := result(t, flusher, "the interrupted write"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("interrupted write: %v, want the deadline error", err)
	}
	if c.alive() {
		t.Fatal("connection alive after part of a frame went out")
	}
	if err := result(t, queued, "the queued write"); err == nil {
		t.Fatal("write on the failed connection succeeded")
	}
}

// enqueueOnly queues the frame of req like write but does not await it: the
// frame's owner is on its way to the write lock, and the test lets it
// arrive with goAwait. Meanwhile the frame is flushed only by others.
func enqueueOnly(t *testing.T, c *conn, ctx context.Context, req wire.Request) *pendingWrite {
	t.Helper()
	frame, err := wire.AppendFrame(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	return c.enqueue(ctx, frame)
}

// goAwait lets the owner of w arrive: it runs c.await(w) in a goroutine.
func goAwait(c *conn, w *pendingWrite) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- c.await(w) }()
	return ch
}

// flushBehind sets up a flush of others' frames and then the flusher's,
// blocked in the pipe: a write of frame 1 blocks; the frames 2..n+1 of n
// others are queued, their owners not yet waiting; the flusher's frame n+2
// (of size bytes, under ctx) is queued behind them; and the peer reads
// frame 1, so the flusher, the only owner waiting for the lock, writes
// frames 2..n+2 in one Write, which blocks.
func flushBehind(t *testing.T, c *conn, cc *countConn, peer net.Conn, n int, ctx context.Context, size int) ([]*pendingWrite, <-chan error) {
	t.Helper()
	first := blockedWrite(t, c, cc, context.Background(), testReq(1, 10))
	var others []*pendingWrite
	for i := range n {
		others = append(others, enqueueOnly(t, c, context.Background(), testReq(uint64(i+2), 10)))
	}
	flusher := queueBehind(t, c, ctx, testReq(uint64(n+2), size))[0]
	if req := readReq(t, peer); req.ID != 1 {
		t.Fatalf("peer got frame %d, want 1", req.ID)
	}
	if err := result(t, first, "the first write"); err != nil {
		t.Fatalf("first write: %v", err)
	}
	testwait.Until(t, 5*time.Second, "the flusher to write", func() bool { return cc.started.Load() == 2 })
	if w := cc.recorded(); w[1].frames != n+1 {
		t.Fatalf("writes %+v, want frames 2..%d in the second", w, n+2)
	}
	return others, flusher
}

// wantWrites fails the test unless the Write calls carried frames as in
// want.
func wantWrites(t *testing.T, cc *countConn, want ...int) {
	t.Helper()
	w := cc.recorded()
	ok := len(w) == len(want)
	for i := 0; ok && i < len(w); i++ {
		ok = w[i].frames == want[i]
	}
	if !ok {
		t.Fatalf("writes %+v, want frame counts %v", w, want)
	}
}

func TestConnWrite_FlusherCancelPutsBackOthers(t *testing.T) {
	c, cc, peer := newTestConn(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	errGaveUp := errors.New("gave up")
	others, flusher := flushBehind(t, c, cc, peer, 2, ctx, 10)
	last := queueBehind(t, c, context.Background(), testReq(5, 10))[0]
	cancel(errGaveUp)
	if err := result(t, flusher, "the interrupted write"); !errors.Is(err, errGaveUp) {
		t.Fatalf("interrupted write: %v, want its cause", err)
	}
	// Frames 2 and 3 went back to the front of the queue, unfinished: the
	// owner of frame 5 flushes them before its own.
	for _, w := range others {
		select {
		case <-w.done:
			t.Fatalf("a frame put back finished with %v", w.err)
		default:
		}
	}
	for _, want := range []uint64{2, 3, 5} {
		if req := readReq(t, peer); req.ID != want {
			t.Fatalf("peer got frame %d, want %d", req.ID, want)
		}
	}
	for i, w := range others {
		if err := result(t, goAwait(c, w), "an owner"); err != nil {
			t.Fatalf("frame %d: %v", i+2, err)
		}
	}
	if err := result(t, last, "the last write"); err != nil || !c.alive() {
		t.Fatalf("frame 5: %v (connection alive: %v)", err, c.alive())
	}
	wantWrites(t, cc, 1, 3, 3)
}

func TestConnWrite_PutBackFrameFlushedByItsOwner(t *testing.T) {
	c, cc, peer := newTestConn(t)
	ctx, cancel := context.WithCancel(context.Background())
	others, flusher := flushBehind(t, c, cc, peer, 1, ctx, 10)
	cancel()
	if err := result(t, flusher, "the interrupted write"); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted write: %v, want context.Canceled", err)
	}
	if n := queueLen(c); n != 1 || !c.alive() {
		t.Fatalf("%d frames queued (connection alive: %v), want frame 2", n, c.alive())
	}
	// Nobody else waits: frame 2's owner, arriving, flushes it.
	owner := goAwait(c, others[0])
	if req := readReq(t, peer); req.ID != 2 {
		t.Fatalf("peer got frame %d, want 2", req.ID)
	}
	if err := result(t, owner, "frame 2's owner"); err != nil {
		t.Fatalf("frame 2: %v", err)
	}
	wantWrites(t, cc, 1, 2, 1)
}

func TestConnWrite_FlusherDropsCancelledFrames(t *testing.T) {
	c, cc, peer := newTestConn(t)
	first := blockedWrite(t, c, cc, context.Background(), testReq(1, 10))
	// Frame 2's ctx is done before its owner could withdraw it: the
	// flusher of frame 3 finishes it with the cause, unsent.
	ctx, cancel := context.WithCancel(context.Background())
	dropped := enqueueOnly(t, c, ctx, testReq(2, 10))
	third := queueBehind(t, c, context.Background(), testReq(3, 10))[0]
	cancel()
	for _, want := range []uint64{1, 3} {
		if req := readReq(t, peer); req.ID != want {
			t.Fatalf("peer got frame %d, want %d", req.ID, want)
		}
	}
	for _, ch := range []<-chan error{first, third} {
		if err := result(t, ch, "a write"); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	if err := result(t, goAwait(c, dropped), "frame 2's owner"); !errors.Is(err, context.Canceled) {
		t.Fatalf("frame 2: %v, want context.Canceled", err)
	}
	wantWrites(t, cc, 1, 1)
}

// flushBeyondBudget sets up a flusher whose frame is queued behind more
// than flushBytesMax of others' frames: a write of frame 1 blocks; frames
// 2..21 of 16 KiB are queued, their owners not yet waiting; the flusher's
// frame 22 is queued under ctx; the peer reads frame 1, so the flusher
// writes the first 15 of the others' frames, which blocks.
func flushBeyondBudget(t *testing.T, c *conn, cc *countConn, peer net.Conn, ctx context.Context) ([]*pendingWrite, <-chan error) {
	t.Helper()
	first := blockedWrite(t, c, cc, context.Background(), testReq(1, 10))
	var others []*pendingWrite
	for i := range 20 {
		others = append(others, enqueueOnly(t, c, context.Background(), testReq(uint64(i+2), 16<<10)))
	}
	flusher := queueBehind(t, c, ctx, testReq(22, 10))[0]
	if req := readReq(t, peer); req.ID != 1 {
		t.Fatalf("peer got frame %d, want 1", req.ID)
	}
	if err := result(t, first, "the first write"); err != nil {
		t.Fatalf("first write: %v", err)
	}
	testwait.Until(t, 5*time.Second, "the flusher to write", func() bool { return cc.started.Load() == 2 })
	return others, flusher
}

func TestConnWrite_FlusherBeyondBudgetFlushesUntilItsOwn(t *testing.T) {
	c, cc, peer := newTestConn(t)
	others, flusher := flushBeyondBudget(t, c, cc, peer, context.Background())
	for i := range 21 {
		if req := readReq(t, peer); req.ID != uint64(i+2) {
			t.Fatalf("peer got frame %d, want %d", req.ID, i+2)
		}
	}
	if err := result(t, flusher, "the flusher"); err != nil {
		t.Fatalf("flusher: %v", err)
	}
	for i, w := range others {
		if err := result(t, goAwait(c, w), "an owner"); err != nil {
			t.Fatalf("frame %d: %v", i+2, err)
		}
	}
	wantWrites(t, cc, 1, 15, 6)
}

func TestConnWrite_FlusherBeyondBudgetStopsWhenCancelled(t *testing.T) {
	c, cc, peer := newTestConn(t)
	ctx, cancel := context.WithCancel(context.Background())
	others, flusher := flushBeyondBudget(t, c, cc, peer, ctx)
	cancel()
	if err := result(t, flusher, "the interrupted flusher"); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted flusher: %v, want context.Canceled", err)
	}
	if n := queueLen(c); n != 20 || !c.alive() {
		t.Fatalf("%d frames queued (connection alive: %v), want the 20 others", n, c.alive())
	}
	var owners []<-chan error
	for _, w := range others {
		owners = append(owners, goAwait(c, w))
	}
	for i := range 20 {
		if req := readReq(t, peer); req.ID != uint64(i+2) {
			t.Fatalf("peer got frame %d, want %d", req.ID, i+2)
		}
	}
	for i, ch := range owners {
		if err := result(t, ch, "an owner"); err != nil {
			t.Fatalf("frame %d: %v", i+2, err)
		}
	}
}

func TestConnWrite_FramesWholeBeforeAFailureCountAsWritten(t *testing.T) {
	c, cc, peer := newTestConn(t)
	ctx, cancel := context.WithCancel(context.Background())
	others, flusher := flushBehind(t, c, cc, peer, 1, ctx, 1000)
	// The peer takes frame 2 and part of frame 3; the cancellation then
	// cuts the write.
	frame2, _ := wire.AppendFrame(nil, testReq(2, 10))
	if _, err := io.ReadFull(peer, make([]byte, len(frame2)+10)); err != nil {
		t.Fatalf("peer read: %v", err)
	}
	cancel()
	if err := result(t, flusher, "the interrupted write"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("interrupted write: %v, want the deadline error", err)
	}
	if c.alive() {
		t.Fatal("connection alive after part of a frame went out")
	}
	if err := result(t, goAwait(c, others[0]), "frame 2's owner"); err != nil {
		t.Fatalf("frame 2, which went out whole: %v, want written", err)
	}
}

func TestConnWrite_FrameTooLargeSendsNothing(t *testing.T) {
	c, cc, peer := newTestConn(t)
	err := c.write(context.Background(), testReq(1, wire.MaxFrameBytes))
	if !errors.Is(err, wire.ErrFrameTooLarge) {
		t.Fatalf("oversized frame: %v, want ErrFrameTooLarge", err)
	}
	if n := cc.started.Load(); n != 0 || !c.alive() {
		t.Fatalf("%d writes after a refused frame (connection alive: %v)", n, c.alive())
	}
	next := goWrite(c, context.Background(), testReq(2, 10))
	if req := readReq(t, peer); req.ID != 2 {
		t.Fatalf("peer got frame %d, want 2", req.ID)
	}
	if err := result(t, next, "the next write"); err != nil {
		t.Fatalf("next write: %v", err)
	}
}

func TestConnWrite_LargeFrameAmongSmallOnesGoesWholeInOrder(t *testing.T) {
	c, cc, peer := newTestConn(t)
	const large = 2 << 20
	sizes := []int{10, 10, large, 10, 10}
	chs := []<-chan error{blockedWrite(t, c, cc, context.Background(), testReq(1, sizes[0]))}
	var rest []wire.Request
	for i, size := range sizes[1:] {
		rest = append(rest, testReq(uint64(i+2), size))
	}
	chs = append(chs, queueBehind(t, c, context.Background(), rest...)...)
	for i, size := range sizes {
		req := readReq(t, peer)
		want := testReq(uint64(i+1), size)
		if req.ID != want.ID || !bytes.Equal(req.Body, want.Body) {
			t.Fatalf("frame %d: got id %d with %d body bytes, want id %d with %d", i, req.ID, len(req.Body), want.ID, len(want.Body))
		}
	}
	for i, ch := range chs {
		if err := result(t, ch, "a write"); err != nil {
			t.Fatalf("write %d: %v", i+1, err)
		}
	}
	// The small frame before the large one leaves without it; the large
	// one leaves alone; the two after it leave together.
	w := cc.recorded()
	frames := make([]int, len(w))
	for i, r := range w {
		frames[i] = r.frames
	}
	if len(w) != 4 || frames[0] != 1 || frames[1] != 1 || frames[2] != 1 || frames[3] != 2 || w[2].bytes < large {
		t.Fatalf("writes %+v, want 1, 1, the large frame alone, 2", w)
	}
}

func TestConnWrite_FlushBoundedInBytes(t *testing.T) {
	c, cc, peer := newTestConn(t)
	const n, size = 40, 16 << 10
	chs := []<-chan error{blockedWrite(t, c, cc, context.Background(), testReq(1, 10))}
	var rest []wire.Request
	for i := range n {
		rest = append(rest, testReq(uint64(i+2), size))
	}
	chs = append(chs, queueBehind(t, c, context.Background(), rest...)...)
	for i := range n + 1 {
		if req := readReq(t, peer); req.ID != uint64(i+1) {
			t.Fatalf("peer got frame %d, want %d", req.ID, i+1)
		}
	}
	for i, ch := range chs {
		if err := result(t, ch, "a write"); err != nil {
			t.Fatalf("write %d: %v", i+1, err)
		}
	}
	w := cc.recorded()
	for _, r := range w {
		if r.bytes > flushBytesMax {
			t.Fatalf("a write of %d frames and %d bytes, above %d", r.frames, r.bytes, flushBytesMax)
		}
	}
	// 15 frames of 16 KiB and a header fit in 256 KiB: 1 + 15 + 15 + 10.
	if len(w) != 4 {
		t.Fatalf("writes %+v, want 4", w)
	}
}

func TestConnWrite_CancellationsUnderLoad(t *testing.T) {
	const senders, each = 16, 64
	c, _, peer := newTestConn(t)
	got := make(chan []uint64, 1)
	go func() {
		_ = peer.SetReadDeadline(time.Now().Add(30 * time.Second))
		rd := wire.NewReader(bufio.NewReader(peer))
		var ids []uint64
		for {
			req, err := rd.ReadRequest()
			if err != nil {
				break // closed at the end, or a frame cut by a failed write
			}
			ids = append(ids, req.ID)
		}
		got <- ids
	}()
	var mu sync.Mutex
	written := make(map[uint64]bool)
	var cancelled, failed atomic.Int64
	done := make(chan struct{}, senders)
	for g := range senders {
		go func() {
			defer func() { done <- struct{}{} }()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range each {
				id := uint64(g+1)<<32 | uint64(i+1)
				timeout := time.Minute
				if rng.IntN(4) == 0 {
					timeout = time.Duration(rng.IntN(300)) * time.Microsecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				err := c.write(ctx, testReq(id, rng.IntN(8<<10)))
				cancel()
				switch {
				case err == nil:
					mu.Lock()
					written[id] = true
					mu.Unlock()
				case errors.Is(err, context.DeadlineExceeded):
					cancelled.Add(1)
				default:
					failed.Add(1)
				}
			}
		}()
	}
	for range senders {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a sender is stuck")
		}
	}
	alive := c.alive()
	c.close() // ends the peer's reads
	var ids []uint64
	select {
	case ids = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the peer did not stop reading")
	}
	t.Logf("%d written, %d cancelled, %d failed; connection alive: %v", len(written), cancelled.Load(), failed.Load(), alive)
	// Exactly the frames reported written arrived, each sender's in order.
	next := make(map[uint64]uint64)
	for _, id := range ids {
		g, i := id>>32, id&(1<<32-1)
		if !written[id] || i <= next[g] {
			t.Fatalf("frame %d of sender %d arrived (after %d); reported written: %v", i, g, next[g], written[id])
		}
		next[g] = i
	}
	if len(ids) != len(written) {
		t.Fatalf("%d frames arrived, %d reported written", len(ids), len(written))
	}
	if alive && failed.Load() != 0 {
		t.Fatalf("%d writes failed on a live connection", failed.Load())
	}
}
