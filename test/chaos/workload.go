package chaos

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/client"
)

// The workload's queues: grouped orders over three partitions, ungrouped
// (partly delayed) jobs over two, and a single-partition mix.
var workloadQueues = []struct {
	name       string
	partitions int
}{{"chaos-orders", 3}, {"chaos-jobs", 2}, {"chaos-mixed", 1}}

// Queue settings that make retries, lease expiries and dead letters happen
// within seconds.
const (
	visibility  = 1500 * time.Millisecond
	maxReceives = 5
	backoffBase = 100 * time.Millisecond
	backoffMax  = time.Second
)

// Client-side timings.
const (
	sendTimeout   = 4 * time.Second  // one Send call
	sendBudget    = 20 * time.Second // all attempts of one message
	settleTimeout = 4 * time.Second
	receiveWait   = time.Second
)

func queueSettings(partitions int) []client.QueueSetting {
	return []client.QueueSetting{
		client.Partitions(partitions), client.VisibilityTimeout(visibility), client.MaxReceives(maxReceives),
		client.BackoffBase(backoffBase), client.BackoffMax(backoffMax),
		// No cap on dead letters or dedup ids: the checker accounts for
		// every message, and a capped one could leave early.
		client.MaxDead(0), client.MaxDeadBytes(0), client.DedupMaxIDs(0),
	}
}

// Workload runs producers and consumers against the cluster and records
// everything they do.
type Workload struct {
	Seed      int64
	Addrs     []string
	Producers int
	Consumers int
	// Pace is the pause between two messages of one producer.
	Pace time.Duration
	// TLS is what the clients dial with (nil: plaintext).
	TLS *tls.Config
	// Token is the secret the clients present.
	Token string
	Rec   *Recorder
	Logf  func(string, ...any)

	stopSend  chan struct{}
	drain     atomic.Bool
	busy      atomic.Int64 // deliveries being handled
	prodWG    sync.WaitGroup
	consWG    sync.WaitGroup
	handlers  sync.WaitGroup
	cancel    context.CancelFunc
	clients   []*client.Client
	consQueue []*client.Queue
}

func (w *Workload) dial(ctx context.Context, name string) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return client.Dial(ctx, w.Addrs, client.WithClientName(name),
		client.WithDialTimeout(time.Second), client.WithRetryBackoff(20*time.Millisecond, 500*time.Millisecond), client.WithTLS(w.TLS),
		client.WithToken(w.Token))
}

// CreateQueues creates the workload's queues (retrying while the cluster
// settles) and returns their placement, which must give every partition
// min(3, nodes) replicas (the default).
func CreateQueues(ctx context.Context, admin *client.Client, nodes int) (map[PartRef][]string, error) {
	for _, q := range workloadQueues {
		for {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			settings := queueSettings(q.partitions)
			switch q.name {
			case boundedQueue:
				settings = append(settings, client.MaxInFlight(boundedMaxInFlight))
			case rateQueue:
				settings = append(settings, client.MaxDeliveryRate(boundedMaxDeliveryRate))
			}
			err := admin.CreateQueue(cctx, q.name, settings...)
			cancel()
			if err == nil || errors.Is(err, client.ErrQueueExists) {
				break
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("create %s: %w", q.name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	placement, err := Placement(ctx, admin)
	for p, replicas := range placement {
		if len(replicas) != min(3, nodes) {
			return nil, fmt.Errorf("%s was placed on %d replicas %v, want %d", p, len(replicas), replicas, min(3, nodes))
		}
	}
	return placement, err
}

// Placement returns the replicas of every workload partition.
func Placement(ctx context.Context, admin *client.Client) (map[PartRef][]string, error) {
	qs, err := admin.ListQueues(ctx, "chaos-")
	if err != nil {
		return nil, err
	}
	out := map[PartRef][]string{}
	for _, q := range qs {
		for _, p := range q.Partitions {
			out[PartRef{q.Name, p.Index}] = p.Replicas
		}
	}
	return out, nil
}

// Start dials one client per producer and consumer and starts them.
func (w *Workload) Start(ctx context.Context) error {
	w.stopSend = make(chan struct{})
	cctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for k := range w.Consumers {
		cl, err := w.dial(ctx, fmt.Sprintf("chaos-c%d", k+1))
		if err != nil {
			return err
		}
		w.clients = append(w.clients, cl)
		c := &consumer{w: w, name: fmt.Sprintf("c%d", k+1), sem: make(chan struct{}, 16)}
		for _, q := range workloadQueues {
			h := cl.Queue(q.name)
			w.consQueue = append(w.consQueue, h)
			w.consWG.Add(1)
			go c.loop(cctx, h)
		}
	}
	op, err := w.dial(ctx, "chaos-operator")
	if err != nil {
		return err
	}
	w.clients = append(w.clients, op)
	w.prodWG.Add(1)
	go w.redriveLoop(op)
	for k := range w.Producers {
		cl, err := w.dial(ctx, fmt.Sprintf("chaos-p%d", k+1))
		if err != nil {
			return err
		}
		w.clients = append(w.clients, cl)
		p := &producer{w: w, k: k + 1, cl: cl, rng: rand.New(rand.NewPCG(uint64(w.Seed), uint64(k+1))), next: map[string]int{}}
		w.prodWG.Add(1)
		go p.run()
	}
	return nil
}

// redriveEvery is how often the operator redrives dead letters of the
// jobs queue (ungrouped, so no group order is at stake), redriveMax how
// many at most each time.
const (
	redriveEvery = 3 * time.Second
	redriveMax   = 25
)

// redriveLoop is an operator moving dead letters of chaos-jobs back to
// the queue while the producers run: the redriven messages are delivered
// again (attempts from 1) and end acked or dead again, which the checker
// accounts for like any other.
func (w *Workload) redriveLoop(op *client.Client) {
	defer w.prodWG.Done()
	t := time.NewTicker(redriveEvery)
	defer t.Stop()
	total := 0
	for {
		select {
		case <-w.stopSend:
			w.Logf("operator redrove %d dead letters of chaos-jobs", total)
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
		n, err := op.RedriveDeadLetters(ctx, "chaos-jobs", client.DeadFilter{Limit: redriveMax})
		cancel()
		if err == nil {
			total += n
		}
	}
}

// StopProducers stops new messages and the operator's redrives, and waits
// for the producers to finish the message each is sending.
func (w *Workload) StopProducers() {
	close(w.stopSend)
	w.prodWG.Wait()
}

// StopConsumers stops the consumers, lets the deliveries in hand finish
// (for a while), and closes every client.
func (w *Workload) StopConsumers() {
	w.cancel()
	w.consWG.Wait()
	done := make(chan struct{})
	go func() {
		w.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(visibility + 2*settleTimeout):
		w.Logf("!!! %d deliveries still being handled when the consumers stopped", w.busy.Load())
	}
	for _, cl := range w.clients {
		cl.Close()
	}
}

// producer sends messages one at a time: each group has exactly one
// producer, so its send order is well defined.
type producer struct {
	w    *Workload
	k    int
	cl   *client.Client
	rng  *rand.Rand
	next map[string]int // next index of each of its groups
	n    int
}

func (p *producer) run() {
	defer p.w.prodWG.Done()
	for {
		select {
		case <-p.w.stopSend:
			return
		default:
		}
		if p.rng.IntN(batchOneIn) == 0 {
			p.sendBatch()
		} else {
			s, m := p.nextMessage()
			p.w.Rec.NewSend(s)
			p.send(s, m)
		}
		time.Sleep(p.w.Pace)
	}
}

// Workload limits: one message in maxSizeOneIn is as large as a queue
// takes (the default max_message_bytes, 1 MiB, headers none), and each
// producer spreads its orders over ordersGroups groups.
const (
	maxSizeOneIn    = 150
	maxMessageBytes = 1 << 20
	ordersGroups    = 24
	// One step in batchOneIn sends a batch of ungrouped jobs instead of
	// one message: 20-200 messages, or one in four times the largest
	// batch a request carries (1000).
	batchOneIn  = 80
	batchMaxLen = 1000
	// priorityPct of the messages get a priority drawn from 0-9 (the
	// others keep the default, 0): grouped ones too, whose group order
	// the priorities must not change.
	priorityPct = 40
)

// nextMessage draws the next message: mostly grouped orders, ungrouped
// jobs (a third delayed), and a grouped/ungrouped mix; now and then one of
// the largest size.
func (p *producer) nextMessage() (*Send, client.Message) {
	p.n++
	r := p.rng.IntN(100)
	s := &Send{ID: fmt.Sprintf("p%d-%06d", p.k, p.n), Producer: fmt.Sprintf("p%d", p.k), GroupIndex: -1}
	delayIf := func(pct int, lo, spread time.Duration) {
		if p.rng.IntN(100) < pct {
			s.Delay = lo + time.Duration(p.rng.Int64N(int64(spread)))
		}
	}
	switch {
	case r < 55:
		s.Queue, s.Group = "chaos-orders", fmt.Sprintf("p%d-o%d", p.k, p.rng.IntN(ordersGroups))
		delayIf(3, 200*time.Millisecond, 600*time.Millisecond)
	case r < 80:
		s.Queue = "chaos-jobs"
		delayIf(30, 100*time.Millisecond, 1900*time.Millisecond)
	default:
		s.Queue = "chaos-mixed"
		if p.rng.IntN(2) == 0 {
			s.Group = fmt.Sprintf("p%d-m%d", p.k, p.rng.IntN(3))
		}
		delayIf(15, 100*time.Millisecond, 1400*time.Millisecond)
	}
	if s.Group != "" {
		s.GroupIndex = p.next[s.Group]
		p.next[s.Group]++
	}
	if p.rng.IntN(100) < priorityPct {
		s.Priority = client.Priority(p.rng.IntN(int(client.MaxPriority) + 1))
	}
	body := fmt.Sprintf("%s|%s|%d|", s.ID, s.Group, s.GroupIndex)
	pad := p.rng.IntN(200)
	if p.rng.IntN(maxSizeOneIn) == 0 {
		pad = maxMessageBytes - len(body) // the largest message a queue takes
	}
	body += strings.Repeat("x", pad)
	return s, client.Message{ID: s.ID, Group: s.Group, Body: []byte(body), Delay: s.Delay, Priority: s.Priority}
}

// send tries a message, with the same id, until it is confirmed, refused
// for good, or its time budget is spent.
func (p *producer) send(s *Send, m client.Message) {
	deadline := time.Now().Add(sendBudget)
	q := p.cl.Queue(s.Queue)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
		start := now()
		res, err := q.Send(ctx, m)
		end := now()
		cancel()
		a := SendAttempt{Start: start, End: end, Outcome: outcomeOf(err), Partition: res.Partition, Seq: res.Seq, Duplicate: res.Duplicate}
		if err != nil {
			a.Err = err.Error()
		}
		p.w.Rec.SendAttempt(s, a)
		if err == nil || errors.Is(err, client.ErrInvalidArgument) || errors.Is(err, client.ErrMessageTooLarge) ||
			time.Now().After(deadline) {
			return
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// sendBatch sends a batch of ungrouped jobs with SendBatch, retrying the
// messages that failed (same ids) until each is confirmed, refused for
// good, or the time budget is spent.
func (p *producer) sendBatch() {
	n := 20 + p.rng.IntN(180)
	if p.rng.IntN(4) == 0 {
		n = batchMaxLen
	}
	sends := make([]*Send, n)
	msgs := make([]client.Message, n)
	for i := range n {
		p.n++
		s := &Send{ID: fmt.Sprintf("p%d-%06d", p.k, p.n), Producer: fmt.Sprintf("p%d", p.k), GroupIndex: -1, Queue: "chaos-jobs"}
		if p.rng.IntN(100) < 20 {
			s.Delay = 100*time.Millisecond + time.Duration(p.rng.Int64N(int64(time.Second)))
		}
		if p.rng.IntN(100) < priorityPct {
			s.Priority = client.Priority(p.rng.IntN(int(client.MaxPriority) + 1))
		}
		p.w.Rec.NewSend(s)
		sends[i] = s
		msgs[i] = client.Message{ID: s.ID, Body: []byte(s.ID + "||-1|batch"), Delay: s.Delay, Priority: s.Priority}
	}
	deadline := time.Now().Add(sendBudget)
	q := p.cl.Queue("chaos-jobs")
	pending := make([]int, n)
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		batch := make([]client.Message, len(pending))
		for j, i := range pending {
			batch[j] = msgs[i]
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*sendTimeout)
		start := now()
		res, err := q.SendBatch(ctx, batch)
		end := now()
		cancel()
		var be *client.BatchError
		var again []int
		for j, i := range pending {
			e := err
			if errors.As(err, &be) && len(be.Errors) == len(batch) {
				e = be.Errors[j]
			}
			a := SendAttempt{Start: start, End: end, Outcome: outcomeOf(e)}
			if e == nil && j < len(res) {
				a.Partition, a.Seq, a.Duplicate = res[j].Partition, res[j].Seq, res[j].Duplicate
			} else if e != nil {
				a.Err = e.Error()
			}
			p.w.Rec.SendAttempt(sends[i], a)
			if e != nil && !errors.Is(e, client.ErrInvalidArgument) && !errors.Is(e, client.ErrMessageTooLarge) {
				again = append(again, i)
			}
		}
		if pending = again; len(pending) == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// consumer receives from every queue and handles each delivery in its
// own goroutine (at most 16 at once per queue loop).
type consumer struct {
	w    *Workload
	name string
	sem  chan struct{}
}

func (c *consumer) loop(ctx context.Context, q *client.Queue) {
	defer c.w.consWG.Done()
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, receiveWait+4*time.Second)
		start := now()
		ds, err := q.Receive(rctx, client.ReceiveOptions{Max: 4, Wait: receiveWait, Consumer: c.name})
		end := now()
		cancel()
		if err != nil && len(ds) == 0 {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		for _, d := range ds {
			act := c.w.plan(d)
			n := c.w.Rec.Deliver(Delivery{
				ID: d.ID, Queue: q.Name(), Group: d.Group, Partition: d.Partition, Seq: d.Seq, Attempt: d.Attempt,
				Consumer: c.name, RecvStart: start, RecvEnd: end, Deadline: d.Deadline.Round(0),
				LeasedAt: d.Deadline.Round(0).Add(-visibility), Priority: d.Priority, Action: act,
			})
			c.w.busy.Add(1)
			c.w.handlers.Add(1)
			c.sem <- struct{}{}
			go func() {
				defer func() { <-c.sem; c.w.busy.Add(-1); c.w.handlers.Done() }()
				c.handle(d, n, act)
			}()
		}
	}
}

// hash64 mixes the seed with a message id and a number.
func hash64(seed int64, id string, n uint32) uint64 {
	h := fnv.New64a()
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(seed))
	binary.LittleEndian.PutUint32(b[8:], n)
	h.Write(b[:])
	h.Write([]byte(id))
	return h.Sum64()
}

// plan decides, from the seed, message and attempt, what the consumer does
// with a delivery. One message in 80 is poison: nacked or abandoned until
// its receives run out. While draining, everything is acked.
func (w *Workload) plan(d *client.Delivery) Action {
	if w.drain.Load() {
		return ActAck
	}
	r := hash64(w.Seed, d.ID, d.Attempt) % 1000
	if hash64(w.Seed, d.ID, 0)%80 == 0 {
		if r%3 == 0 {
			return ActAbandon
		}
		return ActNack
	}
	switch {
	case r < 40:
		return ActAbandon
	case r < 110:
		return ActNack
	case r < 125:
		return ActReject
	case r < 165:
		return ActSlow
	}
	return ActAck
}

func (c *consumer) handle(d *client.Delivery, n int, act Action) {
	r := hash64(c.w.Seed, d.ID, d.Attempt+1000)
	switch act {
	case ActAbandon:
		return // the consumer "crashed": the lease runs out on the server
	case ActSlow:
		time.Sleep(time.Until(d.Deadline) + 200*time.Millisecond + time.Duration(r%500)*time.Millisecond)
		c.settle(n, SettleAck, d.Ack)
	case ActNack:
		opts := client.NackOptions{Reason: "chaos nack by " + c.name}
		if r%2 == 0 {
			opts.Delay = 100*time.Millisecond + time.Duration(r%500)*time.Millisecond
		}
		c.settle(n, SettleNack, func(ctx context.Context) error { return d.Nack(ctx, opts) })
	case ActReject:
		c.settle(n, SettleReject, func(ctx context.Context) error { return d.Reject(ctx, "chaos reject by "+c.name) })
	default:
		time.Sleep(time.Duration(r%20) * time.Millisecond)
		c.settle(n, SettleAck, d.Ack)
	}
}

func (c *consumer) settle(n int, kind SettleKind, f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	start := now()
	err := f(ctx)
	s := Settle{Delivery: n, Kind: kind, Start: start, End: now(), Outcome: outcomeOf(err),
		LeaseLost: errors.Is(err, client.ErrLeaseLost), Gone: errors.Is(err, client.ErrMessageNotFound)}
	if err != nil {
		s.Err = err.Error()
	}
	c.w.Rec.Settle(s)
}
