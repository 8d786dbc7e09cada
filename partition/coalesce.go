package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/hashicorp/raft"
)

// One worker proposes the merged commands of a kind: while a proposal is
// in flight, new requests queue up and go out together next. When at
// least Config.OverlapItemsMin items (or a quarter of ProposalBytesMax)
// wait behind a proposal in flight, the worker hands raft a second one
// before the first is answered; never more than ProposalsInFlightMax.
// Below that threshold proposals go one at a time: two in flight would
// split a short queue into more, smaller proposals and more fsyncs on
// every replica. Overlap once gained much on a disk-bound machine (16
// synchronous clients 7,000-9,200 msgs/s one at a time, 11,300-13,700
// with a threshold of 8, when the leader stored its entries before
// replicating them); since the leader writes beside replication and the
// CPU bounds the rounds, it pays only when a whole proposal's worth
// waits (see DefaultOverlapItemsMin). The worker starts proposals in queue
// order, so they take the raft log in that order, and answers them in
// that order; the slices of one request are never in flight together,
// so a failed slice leaves the rest of its request unproposed.

// ProposalsInFlightMax bounds the merged proposals of one kind that a
// partition has handed raft and not yet seen answered.
const ProposalsInFlightMax = 2

// ProposalBytesMax bounds the items one merged proposal carries, in bytes
// (as counted by the batcher's size function). Requests are cut into
// slices at item boundaries to stay under it; a single item larger than
// the bound is proposed alone. With MaxAppendEntries entries per
// AppendEntries round this bounds a round's bytes (transport also cuts
// rounds into byte-bounded RPCs). Measured: 1 MiB entries keep the
// single-in-flight proposal path above 200 MB/s on one disk.
const ProposalBytesMax = 1 << 20

// batcher merges concurrent requests of one per-item command (send, ack)
// into single proposals. On a multi-replica group every proposal costs a
// raft round with an fsync on each replica; merging the requests that
// arrive during one round into the next means the number of rounds, not of
// requests, bounds throughput. Items keep their request order and the FSM
// answers per item, so a merged proposal means exactly what the requests
// would have meant one after the other.
//
// A proposal carries at most fsm.BatchMax items and ProposalBytesMax bytes
// (or one larger item). A request bigger than that is proposed in slices,
// in order, by the one worker; if a slice fails the rest of that request
// is not proposed and the request gets the error (a retried send is safe:
// the dedup window answers the slices already applied).
type batcher[I, O any] struct {
	p       *Partition
	command func([]I) fsm.Command
	results func(fsm.Result) []O
	size    func(I) int

	mu      sync.Mutex
	queue   []*batchRequest[I, O]
	closed  bool // set by failQueued: nothing more is proposed
	running bool // the worker and finishAll run (see ensureRunningLocked)
	wake    chan struct{}

	// Guarded by mu: the queue's untaken items and their bytes, kept with
	// it so that a submitter tells at once whether its arrival is one the
	// worker waits for (see wakeLocked); what the worker waits for; the
	// requests the next proposal expects (see Config.GatherWait); and,
	// while it gathers, when the last request came.
	untakenItems, untakenBytes int
	waiting                    workerWait
	expect                     int
	lastArrival                time.Time

	// overlapped counts proposals started while another was in flight.
	overlapped atomic.Uint64

	// Owned by the worker: the timer that bounds gathering.
	timer *time.Timer
}

// workerWait is what a batcher's worker waits for, which decides whether
// a new request wakes it: every wake-up of a parked goroutine costs a
// thread switch, and under synchronous load most arrivals need none.
type workerWait uint8

const (
	// workerAwake: the worker runs, or waits with nothing in flight;
	// every arrival wakes it.
	workerAwake workerWait = iota
	// workerGathering: it gathers (see gather); only the arrival that
	// completes the expected requests or fills a proposal wakes it, the
	// others move its timer on (lastArrival).
	workerGathering
	// workerInFlight: it waits for a proposal's outcome; only a queue
	// deep enough for a second proposal (deepLocked) wakes it.
	workerInFlight
)

// inFlightProposal is a merged proposal handed to raft: its slices and
// the future that answers them (nil with err when it never reached raft).
type inFlightProposal[I, O any] struct {
	slices []batchSlice[I, O]
	items  int
	future raft.ApplyFuture
	err    error
}

type batchRequest[I, O any] struct {
	ctx   context.Context
	items []I
	done  chan batchReply[O]

	// Guarded by batcher.mu once the request is queued.
	taken   int // items handed to proposals so far
	out     []O
	settled int // items answered so far
	failed  bool
}

type batchReply[O any] struct {
	out []O
	err error
}

// batchSlice is the part [from, to) of a request's items in one proposal.
type batchSlice[I, O any] struct {
	req      *batchRequest[I, O]
	from, to int
}

// batcherIdle is how long a batcher's goroutines wait for requests before
// they end; the next request starts them again. A follower's batchers
// (which take no requests) and an idle leader's run none.
const batcherIdle = 2 * time.Second

func newBatcher[I, O any](p *Partition, command func([]I) fsm.Command, results func(fsm.Result) []O, size func(I) int) *batcher[I, O] {
	return &batcher[I, O]{p: p, command: command, results: results, size: size,
		wake: make(chan struct{}, 1),
	}
}

// ensureRunningLocked starts the worker and finishAll unless they run or
// the partition is closing (a queued request then sees p.closing). b.mu
// held: the worker ends only with b.mu held and the queue empty, so a
// request queued under the same hold is always taken.
func (b *batcher[I, O]) ensureRunningLocked() {
	if b.running || b.closed || !b.p.track() {
		return
	}
	if !b.p.track() { // one count per goroutine
		b.p.loops.Done()
		return
	}
	b.running = true
	// started carries proposals from the worker, in raft log order, to
	// the goroutine that waits for their outcomes (finish); finished
	// carries back how many requests each one answered.
	started := make(chan *inFlightProposal[I, O], ProposalsInFlightMax)
	finished := make(chan int, ProposalsInFlightMax)
	go b.run(started, finished)
	go b.finishAll(started, finished)
}

// submit queues items and waits for their results. Once any of its items
// is proposed a request always waits for the outcome, whatever its context
// says, so that an applied change is never reported as not done; a request
// whose context ends while still wholly queued is dropped unproposed. On
// Close a queued request is answered ErrClosed and a proposed one gets its
// outcome, which raft's shutdown bounds.
func (b *batcher[I, O]) submit(ctx context.Context, items []I) ([]O, error) {
	if err := b.p.checkLeader(); err != nil {
		return nil, err
	}
	if err := fsm.CheckBatch(len(items)); err != nil {
		return nil, err
	}
	req := &batchRequest[I, O]{ctx: ctx, items: items, done: make(chan batchReply[O], 1)}
	bytes := b.bytesOf(items)
	b.mu.Lock()
	b.enqueueLocked(req, bytes)
	b.ensureRunningLocked()
	wake := b.wakeLocked()
	b.mu.Unlock()
	if wake {
		b.signal()
	}
	select {
	case r := <-req.done:
		return r.out, r.err
	case <-b.p.closing:
		if b.unqueue(req) {
			return nil, ErrClosed
		}
		r := <-req.done // a worker has it: the outcome is coming
		return r.out, r.err
	}
}

// bytesOf returns the bytes of items, as b.size counts them.
func (b *batcher[I, O]) bytesOf(items []I) int {
	n := 0
	for _, it := range items {
		n += b.size(it)
	}
	return n
}

// enqueueLocked queues req, whose items weigh bytes.
func (b *batcher[I, O]) enqueueLocked(req *batchRequest[I, O], bytes int) {
	b.queue = append(b.queue, req)
	b.untakenItems += len(req.items)
	b.untakenBytes += bytes
}

// checkBatcherCounts makes take check the queue's running counts against
// a full recount (tests set it: the recount walks the whole queue).
var checkBatcherCounts bool

// assertCountsLocked panics if the running counts of untaken items and
// bytes differ from the queue's: gathering and overlap would then wait
// for, or skip, the wrong requests.
func (b *batcher[I, O]) assertCountsLocked() {
	items, bytes := 0, 0
	for _, r := range b.queue {
		items += len(r.items) - r.taken
		bytes += b.bytesOf(r.items[r.taken:])
	}
	if items != b.untakenItems || bytes != b.untakenBytes {
		panic(fmt.Sprintf("partition: batcher counts %d items, %d bytes untaken; the queue holds %d, %d",
			b.untakenItems, b.untakenBytes, items, bytes))
	}
}

// uncountLocked takes r's untaken items off the queue's counts, as r
// leaves the queue.
func (b *batcher[I, O]) uncountLocked(r *batchRequest[I, O]) {
	b.untakenItems -= len(r.items) - r.taken
	b.untakenBytes -= b.bytesOf(r.items[r.taken:])
}

// wakeLocked reports whether the request just queued should wake the
// worker (see workerWait); while it gathers it also notes the arrival.
func (b *batcher[I, O]) wakeLocked() bool {
	switch b.waiting {
	case workerGathering:
		b.lastArrival = time.Now()
		return b.gatheredLocked()
	case workerInFlight:
		return b.deepLocked()
	}
	return true
}

// signal wakes the worker, or leaves it a wake-up if it runs.
func (b *batcher[I, O]) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// setWaiting records what the worker is about to wait for.
func (b *batcher[I, O]) setWaiting(w workerWait) {
	b.mu.Lock()
	b.waiting = w
	b.mu.Unlock()
}

// unqueue removes req if no item of it was taken yet.
func (b *batcher[I, O]) unqueue(req *batchRequest[I, O]) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, r := range b.queue {
		if r == req && r.taken == 0 {
			b.uncountLocked(r)
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return true
		}
	}
	return false
}

// take cuts the next proposal off the queue: whole requests and slices of
// them, at most fsm.BatchMax items and ProposalBytesMax bytes, at least one
// item. Requests whose context ended before any item was taken are
// answered and dropped. With overlap (a proposal is in flight) it takes
// nothing unless the queue is deep (see deepLocked).
func (b *batcher[I, O]) take(overlap bool) []batchSlice[I, O] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if checkBatcherCounts {
		defer b.assertCountsLocked()
	}
	if overlap && !b.deepLocked() {
		return nil
	}
	var slices []batchSlice[I, O]
	items, bytes := 0, 0
	for len(b.queue) > 0 && items < fsm.BatchMax {
		r := b.queue[0]
		if r.taken == 0 && r.ctx.Err() != nil {
			r.failed = true
			r.done <- batchReply[O]{err: fmt.Errorf("%w: %w", ErrTimeout, r.ctx.Err())}
			b.uncountLocked(r)
			b.queue = b.queue[1:]
			continue
		}
		from, to, bytesBefore := r.taken, r.taken, bytes
		for to < len(r.items) && items < fsm.BatchMax {
			n := b.size(r.items[to])
			if items > 0 && bytes+n > ProposalBytesMax {
				break
			}
			items, bytes, to = items+1, bytes+n, to+1
		}
		if to == from {
			break // the proposal is full
		}
		b.untakenItems -= to - from
		b.untakenBytes -= bytes - bytesBefore
		r.taken = to
		slices = append(slices, batchSlice[I, O]{req: r, from: from, to: to})
		if to < len(r.items) {
			break // the rest of r goes in the next proposal
		}
		b.queue = b.queue[1:]
	}
	return slices
}

// deepLocked reports whether a second proposal may start while one is in
// flight: Config.OverlapItemsMin (> 0) items, or a quarter of
// ProposalBytesMax, wait untaken, and the first request waiting has no
// slice proposed yet (the slices of one request are proposed one at a
// time, so that a failed one stops the rest).
func (b *batcher[I, O]) deepLocked() bool {
	min := b.p.cfg.OverlapItemsMin
	if min <= 0 || len(b.queue) == 0 || b.queue[0].taken > 0 {
		return false
	}
	return b.untakenItems >= min || b.untakenBytes >= ProposalBytesMax/4
}

// run is the worker: it starts proposals, one at a time or, under a deep
// queue, a second while one is in flight, and hands each to finishAll.
// It ends once nothing was queued or in flight for batcherIdle.
func (b *batcher[I, O]) run(started chan<- *inFlightProposal[I, O], finished <-chan int) {
	defer b.p.loops.Done()
	defer close(started) // finishAll answers what is in flight, then ends
	b.timer = time.NewTimer(time.Hour)
	b.timer.Stop()
	defer b.timer.Stop()
	idle := time.NewTimer(batcherIdle)
	defer idle.Stop()
	inFlight := 0
	for {
		if inFlight > 0 {
			b.setWaiting(workerInFlight)
		}
		select {
		case <-b.p.closing:
			b.failQueued(ErrClosed)
			return
		case <-idle.C:
			if inFlight == 0 && b.stopIfIdle() {
				return
			}
		case <-b.wake:
		case answered := <-finished:
			inFlight--
			// The requests just answered are likely to come back; those
			// queued meanwhile are already here.
			b.mu.Lock()
			b.expect = answered + len(b.queue)
			b.mu.Unlock()
		}
		b.setWaiting(workerAwake)
		for inFlight < ProposalsInFlightMax {
			if inFlight == 0 {
				b.gather()
			}
			slices := b.take(inFlight > 0)
			if len(slices) == 0 {
				break
			}
			if inFlight > 0 {
				b.overlapped.Add(1)
			}
			started <- b.start(slices)
			inFlight++
		}
		if inFlight == 0 {
			idle.Reset(batcherIdle)
		} else {
			idle.Stop()
		}
	}
}

// stopIfIdle ends the worker's incarnation if nothing is queued.
func (b *batcher[I, O]) stopIfIdle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) > 0 {
		return false
	}
	b.running = false
	return true
}

// fullLocked reports whether the untaken items fill a proposal.
func (b *batcher[I, O]) fullLocked() bool {
	return b.untakenItems >= fsm.BatchMax || b.untakenBytes >= ProposalBytesMax
}

// gatheredLocked reports whether gathering is over as far as the queue
// goes: nothing queued, the expected requests queued, or a full proposal.
func (b *batcher[I, O]) gatheredLocked() bool {
	n := len(b.queue)
	return n == 0 || n >= b.expect || b.fullLocked()
}

// gatherSpanWaits bounds one gathering: at most this many times
// Config.GatherWait in all, however steadily requests keep coming.
const gatherSpanWaits = 4

// gather waits until b.expect requests are queued or a proposal's worth of
// items is (see gatheredLocked), for as long as they keep coming: it stops once
// Config.GatherWait passes with no new request, or gatherSpanWaits times
// that in all. Concurrent synchronous clients answered by one proposal
// then share the next one, rather than splitting into cohorts that take
// alternate raft rounds; on a busy machine their turnaround spreads out,
// and a fixed wait left part of them to the round after. A client that
// does not come back (it has other work between sends) costs the others
// one GatherWait. It returns at once when nothing more is expected, so a
// lone client never waits, and when the partition closes.
func (b *batcher[I, O]) gather() {
	wait := b.p.cfg.GatherWait
	b.mu.Lock()
	if wait <= 0 || b.expect <= 1 || b.gatheredLocked() {
		b.mu.Unlock()
		return
	}
	start := time.Now()
	b.waiting, b.lastArrival = workerGathering, start
	b.mu.Unlock()
	defer b.setWaiting(workerAwake)
	deadline := start.Add(gatherSpanWaits * wait)
	b.timer.Reset(wait)
	defer b.timer.Stop()
	for {
		select {
		case <-b.p.closing:
			return
		case <-b.wake: // the last expected request came, or an earlier wake-up
		case <-b.timer.C:
		}
		b.mu.Lock()
		done, next := b.gatheredLocked(), b.lastArrival.Add(wait)
		b.mu.Unlock()
		now := time.Now()
		if done || !now.Before(next) || !now.Before(deadline) {
			return
		}
		if deadline.Before(next) {
			next = deadline
		}
		b.timer.Reset(next.Sub(now))
	}
}

// start hands raft one merged command for slices. A command that never
// reached raft carries its error to finish like an answer would.
func (b *batcher[I, O]) start(slices []batchSlice[I, O]) *inFlightProposal[I, O] {
	count := 0
	for _, s := range slices {
		count += s.to - s.from
	}
	items := make([]I, 0, count)
	for _, s := range slices {
		items = append(items, s.req.items[s.from:s.to]...)
	}
	pr := &inFlightProposal[I, O]{slices: slices, items: len(items)}
	pr.future, pr.err = b.p.startProposal(context.Background(), b.command(items))
	return pr
}

// finishAll waits for the outcome of each started proposal, in the order
// they were started, and answers their requests.
func (b *batcher[I, O]) finishAll(started <-chan *inFlightProposal[I, O], finished chan<- int) {
	defer b.p.loops.Done()
	for pr := range started {
		finished <- b.finish(pr)
	}
}

// finish waits for one proposal's outcome and hands each request its
// results once all its items are answered. It returns how many requests
// the proposal carried.
func (b *batcher[I, O]) finish(pr *inFlightProposal[I, O]) int {
	var res fsm.Result
	err := pr.err
	if err == nil {
		res, err = b.p.proposalResult(pr.future)
	}
	if err == nil && res.Err != nil {
		err = res.Err
	}
	var out []O
	if err == nil {
		out = b.results(res)
		if len(out) != pr.items {
			err = errors.New("partition: merged proposal answered the wrong number of items")
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range pr.slices {
		n := s.to - s.from
		if err != nil {
			b.settleLocked(s, nil, err)
			continue
		}
		b.settleLocked(s, out[:n:n], nil)
		out = out[n:]
	}
	return len(pr.slices)
}

// settleLocked records a slice's outcome and answers its request when the
// last slice is in, or at the first failure: the request's untaken items
// are then dropped from the queue.
func (b *batcher[I, O]) settleLocked(s batchSlice[I, O], out []O, err error) {
	r := s.req
	if r.failed {
		return
	}
	if err != nil {
		r.failed = true
		r.out = nil
		r.done <- batchReply[O]{err: err}
		b.dropLocked(r)
		return
	}
	r.out = append(r.out, out...)
	r.settled += s.to - s.from
	switch {
	case r.settled == len(r.items):
		r.done <- batchReply[O]{out: r.out}
	case b.closed && r.settled == r.taken:
		// The partition closed while this slice was in flight: the rest
		// of the request will not be proposed.
		r.failed = true
		r.out = nil
		r.done <- batchReply[O]{err: ErrClosed}
	}
}

// dropLocked removes a request from the queue, if it is there.
func (b *batcher[I, O]) dropLocked(r *batchRequest[I, O]) {
	for i, q := range b.queue {
		if q == r {
			b.uncountLocked(r)
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return
		}
	}
}

// failQueued answers every queued request that no proposal in flight
// carries a slice of: a request with a slice in flight gets that slice's
// outcome (and, if it had more, this error once the slice succeeds).
func (b *batcher[I, O]) failQueued(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, r := range b.queue {
		if !r.failed && r.settled == r.taken {
			r.failed = true
			r.done <- batchReply[O]{err: err}
		}
	}
	b.queue = nil
	b.untakenItems, b.untakenBytes = 0, 0
}

// Send enqueues messages, merged with concurrent sends into as few raft
// entries as possible, and returns one outcome per message after commit.
//
// Messages the FSM would refuse for their own shape or size (too large,
// bad id, ...) are answered at once and never proposed, so an oversized
// message costs no raft entry on any replica.
func (p *Partition) Send(ctx context.Context, msgs []fsm.NewMessage) ([]fsm.SendOutcome, error) {
	if err := fsm.CheckBatch(len(msgs)); err != nil {
		return nil, err
	}
	if err := p.checkLeader(); err != nil {
		return nil, err
	}
	if err := p.disk.check(time.Now()); err != nil {
		return nil, err
	}
	refused := p.validateNew(msgs)
	if refused == nil {
		// The common case: every message is proposed, and the
		// batcher's outcomes are the answer as they are.
		return p.sends.submit(ctx, msgs)
	}
	valid := make([]fsm.NewMessage, 0, len(msgs))
	for i := range msgs {
		if refused[i].Err == nil {
			valid = append(valid, msgs[i])
		}
	}
	if len(valid) == 0 {
		return refused, nil
	}
	sent, err := p.sends.submit(ctx, valid)
	if err != nil {
		return nil, err
	}
	k := 0
	for i := range refused {
		if refused[i].Err == nil {
			refused[i] = sent[k]
			k++
		}
	}
	return refused, nil
}

// validateNew checks msgs as the FSM would; it returns nil when all pass,
// else one outcome per message, with an error for those refused.
func (p *Partition) validateNew(msgs []fsm.NewMessage) []fsm.SendOutcome {
	var out []fsm.SendOutcome
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range msgs {
		if err := p.fsm.ValidateNew(&msgs[i]); err != nil {
			if out == nil {
				out = make([]fsm.SendOutcome, len(msgs))
			}
			out[i].Err = err
		}
	}
	return out
}

// Ack deletes the messages of receipts, merged with concurrent acks, and
// returns one error (or nil) per receipt.
func (p *Partition) Ack(ctx context.Context, receipts []fsm.Receipt) ([]error, error) {
	return p.acks.submit(ctx, receipts)
}

func (p *Partition) startBatchers() {
	p.sends = newBatcher(p,
		func(ms []fsm.NewMessage) fsm.Command {
			return fsm.Command{Type: fsm.CmdSend, Send: &fsm.SendCmd{Messages: ms}}
		},
		func(r fsm.Result) []fsm.SendOutcome { return r.Sent },
		func(m fsm.NewMessage) int { return m.EncodedBytes() })
	p.acks = newBatcher(p,
		func(rs []fsm.Receipt) fsm.Command {
			return fsm.Command{Type: fsm.CmdAck, Ack: &fsm.AckCmd{Receipts: rs}}
		},
		func(r fsm.Result) []error { return r.Settled },
		func(fsm.Receipt) int { return 16 })
}
