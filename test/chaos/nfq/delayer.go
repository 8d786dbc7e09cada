package nfq

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Config is how a Delayer treats the packets of its queue.
type Config struct {
	Queue  uint16        // NFQUEUE number the iptables rules name
	Delay  time.Duration // mean delay of every packet
	Jitter time.Duration // spread around Delay: half-width (uniform) or standard deviation (normal)
	Normal bool          // draw jitter from a normal distribution rather than a uniform one
	// Reorder is the fraction of packets (0..1) that get ReorderExtra on
	// top of their delay, so that packets queued after them overtake them.
	Reorder      float64
	ReorderExtra time.Duration
	// MaxHeld bounds the packets held at once; beyond it a packet is
	// accepted at once and counted in Stats.Overflow. Zero means 4096.
	MaxHeld int
	// QueueLen is the kernel's queue length (NFQA_CFG_QUEUE_MAXLEN);
	// beyond it the kernel accepts packets unqueued. Zero means 2×MaxHeld.
	QueueLen uint32
	Seed     uint64 // seeds the delay draws
}

// Bounds of a Config.
const (
	MaxDelay   = 30 * time.Second // bounds Delay, Jitter and ReorderExtra each
	MaxHeldCap = 1 << 16          // bounds MaxHeld
)

func (c *Config) validate() error {
	if c.MaxHeld == 0 {
		c.MaxHeld = 4096
	}
	if c.QueueLen == 0 {
		c.QueueLen = uint32(min(2*c.MaxHeld, maxQueueLen))
	}
	for _, d := range []time.Duration{c.Delay, c.Jitter, c.ReorderExtra} {
		if d < 0 || d > MaxDelay {
			return fmt.Errorf("%w: delay %v outside 0..%v", ErrConfig, d, MaxDelay)
		}
	}
	switch {
	case c.Reorder < 0 || c.Reorder > 1 || c.Reorder != c.Reorder:
		return fmt.Errorf("%w: reorder fraction %v outside 0..1", ErrConfig, c.Reorder)
	case c.MaxHeld < 0 || c.MaxHeld > MaxHeldCap:
		return fmt.Errorf("%w: max held %d outside 1..%d", ErrConfig, c.MaxHeld, MaxHeldCap)
	}
	return nil
}

// Stats counts what a Delayer has done.
type Stats struct {
	Queued    uint64 // packets received from the queue
	Accepted  uint64 // verdicts issued
	Reordered uint64 // packets given the reorder extra
	Overflow  uint64 // packets accepted at once because MaxHeld were held
	Flushed   uint64 // held packets accepted early by Stop
	Errors    uint64 // failed verdicts and stray netlink messages
}

// Delayer holds each packet of one NFQUEUE for a drawn delay and then
// accepts it. One goroutine receives packets and issues verdicts from a
// heap ordered by due time; nothing else runs per packet.
type Delayer struct {
	cfg  Config
	q    *Queue
	rng  *rand.Rand
	held held
	next uint64 // arrival sequence, breaks ties between equal due times

	stopping atomic.Bool
	killing  atomic.Bool
	done     chan struct{}
	stopOnce sync.Once
	err      error // the loop's error, readable after done

	heldNow                                                    atomic.Int64
	queued, accepted, reordered, overflow, flushed, verdictErr atomic.Uint64
}

// Start binds the queue and starts delaying its packets.
func Start(cfg Config) (*Delayer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	q, err := Open(cfg.Queue, cfg.QueueLen)
	if err != nil {
		return nil, err
	}
	d := &Delayer{cfg: cfg, q: q, rng: rand.New(rand.NewPCG(cfg.Seed, 0xde1a7)), done: make(chan struct{})}
	go d.loop()
	return d, nil
}

// Config returns the configuration in force (with defaults filled in).
func (d *Delayer) Config() Config { return d.cfg }

// Held returns how many packets are held now.
func (d *Delayer) Held() int { return int(d.heldNow.Load()) }

// Stats returns the counters so far.
func (d *Delayer) Stats() Stats {
	return Stats{Queued: d.queued.Load(), Accepted: d.accepted.Load(), Reordered: d.reordered.Load(),
		Overflow: d.overflow.Load(), Flushed: d.flushed.Load(), Errors: d.verdictErr.Load() + d.q.Stray.Load()}
}

// Stop accepts every held packet at once, accepts whatever is still
// queued, closes the queue and waits for the loop to end. Packets that
// reach the rules afterwards pass through --queue-bypass. Safe to call
// more than once; it returns the loop's error, if any.
func (d *Delayer) Stop() error {
	d.stopOnce.Do(func() { d.stopping.Store(true) })
	<-d.done
	return d.err
}

// Kill closes the queue without issuing verdicts, as the death of the
// process would: the kernel drops the packets it still holds, and later
// packets pass through --queue-bypass. For tests of the fail-open path.
func (d *Delayer) Kill() {
	d.killing.Store(true)
	d.stopOnce.Do(func() { d.stopping.Store(true) })
	<-d.done
}

// loop receives packets and issues verdicts when they fall due.
func (d *Delayer) loop() {
	defer close(d.done)
	defer d.q.Close()
	var ids []uint32
	for !d.stopping.Load() {
		now := time.Now()
		d.acceptDue(now)
		wait := 50 * time.Millisecond
		if len(d.held) > 0 {
			wait = min(wait, max(d.held[0].due.Sub(now), time.Millisecond))
		}
		var err error
		ids, err = d.q.Recv(ids[:0], wait)
		if err != nil {
			d.err = err
			break
		}
		d.hold(ids, time.Now())
	}
	if d.killing.Load() {
		return
	}
	d.flush()
}

// hold schedules the packets received at t.
func (d *Delayer) hold(ids []uint32, t time.Time) {
	for _, id := range ids {
		d.queued.Add(1)
		if len(d.held) >= d.cfg.MaxHeld {
			d.overflow.Add(1)
			d.accept(id)
			continue
		}
		d.next++
		heap.Push(&d.held, heldPacket{due: t.Add(d.draw()), seq: d.next, id: id})
		d.heldNow.Store(int64(len(d.held)))
	}
}

// draw returns one packet's delay.
func (d *Delayer) draw() time.Duration {
	c := d.cfg
	delay := c.Delay
	if c.Jitter > 0 {
		if c.Normal {
			delay += time.Duration(d.rng.NormFloat64() * float64(c.Jitter))
		} else {
			delay += time.Duration(d.rng.Int64N(int64(2*c.Jitter)+1)) - c.Jitter
		}
	}
	if c.Reorder > 0 && d.rng.Float64() < c.Reorder {
		d.reordered.Add(1)
		delay += c.ReorderExtra
	}
	return max(delay, 0)
}

// acceptDue accepts every held packet due by now.
func (d *Delayer) acceptDue(now time.Time) {
	for len(d.held) > 0 && !d.held[0].due.After(now) {
		p := heap.Pop(&d.held).(heldPacket)
		d.accept(p.id)
	}
	d.heldNow.Store(int64(len(d.held)))
}

// flush accepts every held packet, then whatever the kernel still has
// queued for this socket, until a receive finds nothing.
func (d *Delayer) flush() {
	for len(d.held) > 0 {
		p := heap.Pop(&d.held).(heldPacket)
		d.flushed.Add(1)
		d.accept(p.id)
	}
	d.heldNow.Store(0)
	var ids []uint32
	for range 1000 {
		var err error
		ids, err = d.q.Recv(ids[:0], 5*time.Millisecond)
		if err != nil || len(ids) == 0 {
			return
		}
		for _, id := range ids {
			d.queued.Add(1)
			d.flushed.Add(1)
			d.accept(id)
		}
	}
}

func (d *Delayer) accept(id uint32) {
	if err := d.q.Accept(id); err != nil {
		d.verdictErr.Add(1)
		return
	}
	d.accepted.Add(1)
}

// heldPacket is a packet waiting for its verdict.
type heldPacket struct {
	due time.Time
	seq uint64
	id  uint32
}

// held is a min-heap of packets by due time, then arrival.
type held []heldPacket

func (h held) Len() int { return len(h) }
func (h held) Less(i, j int) bool {
	if h[i].due.Equal(h[j].due) {
		return h[i].seq < h[j].seq
	}
	return h[i].due.Before(h[j].due)
}
func (h held) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *held) Push(x any)   { *h = append(*h, x.(heldPacket)) }
func (h *held) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
