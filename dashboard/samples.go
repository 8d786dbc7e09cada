package dashboard

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Bounds of the sample history kept for the charts.
const (
	// SampleInterval is how often queue figures are sampled while the
	// dashboard is in use.
	SampleInterval = 2 * time.Second
	// samplesPerQueue bounds one queue's ring: five minutes at
	// SampleInterval.
	samplesPerQueue = 150
	// sampledQueuesMax bounds the queues sampled (the first by name).
	sampledQueuesMax = 64
	// samplerIdle stops sampling after this long without a page view.
	samplerIdle = 10 * time.Minute
	// rateWindow is the span a rate is measured over.
	rateWindow = 10 * time.Second
)

// Sample is one reading of a queue's totals.
type Sample struct {
	At                                time.Time
	Ready, InFlight, Delayed, Dead    int64
	Sent, Acked, Nacked, DeadLettered uint64
}

// Rates are events per second over the last rateWindow.
type Rates struct {
	Send, Ack, Nack, DeadLetter float64
	// Known is false until two samples far enough apart exist.
	Known bool
}

// ring is a fixed-size ring of samples, oldest first when read.
type ring struct {
	buf  [samplesPerQueue]Sample
	next int
	full bool
}

func (r *ring) add(s Sample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % samplesPerQueue
	if r.next == 0 {
		r.full = true
	}
}

func (r *ring) list() []Sample {
	if !r.full {
		return append([]Sample(nil), r.buf[:r.next]...)
	}
	return append(append([]Sample(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}

// sampleOf reads the totals of a queue's stats.
func sampleOf(at time.Time, st client.Stats) Sample {
	t := st.Total()
	return Sample{At: at, Ready: t.Ready, InFlight: t.InFlight, Delayed: t.Delayed, Dead: t.Dead,
		Sent: t.Counters.Sent, Acked: t.Counters.Acked, Nacked: t.Counters.Nacked, DeadLettered: t.Counters.DeadLettered}
}

// ratesOf computes rates from the newest sample and the newest one at
// least rateWindow older (or the oldest, if none is).
func ratesOf(ss []Sample) Rates {
	if len(ss) < 2 {
		return Rates{}
	}
	last := ss[len(ss)-1]
	first := ss[0]
	for i := len(ss) - 2; i >= 0; i-- {
		if last.At.Sub(ss[i].At) >= rateWindow {
			first = ss[i]
			break
		}
	}
	dt := last.At.Sub(first.At).Seconds()
	if dt <= 0 {
		return Rates{}
	}
	per := func(a, b uint64) float64 {
		if b < a { // counters restarted (queue recreated): no rate
			return 0
		}
		return float64(b-a) / dt
	}
	return Rates{Send: per(first.Sent, last.Sent), Ack: per(first.Acked, last.Acked),
		Nack: per(first.Nacked, last.Nacked), DeadLetter: per(first.DeadLettered, last.DeadLettered), Known: true}
}

// sampler keeps the rings. It samples in the background only while the
// dashboard is being looked at: touch starts it, and it stops itself
// after samplerIdle without a touch.
type sampler struct {
	queues func(ctx context.Context) (Queues, error)

	mu      sync.Mutex
	rings   map[string]*ring
	touched time.Time
	running bool
	stop    chan struct{}
	stopped bool
}

func newSampler(queues func(ctx context.Context) (Queues, error)) *sampler {
	return &sampler{queues: queues, rings: map[string]*ring{}, stop: make(chan struct{})}
}

// touch notes a page view and starts sampling if it is not running.
func (s *sampler) touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touched = time.Now()
	if s.running || s.stopped {
		return
	}
	s.running = true
	go s.loop()
}

// close stops the background sampling for good.
func (s *sampler) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		close(s.stop)
	}
}

func (s *sampler) loop() {
	t := time.NewTicker(SampleInterval)
	defer t.Stop()
	for {
		s.sampleOnce()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		idle := time.Since(s.touched) > samplerIdle
		if idle {
			s.running = false
		}
		s.mu.Unlock()
		if idle {
			return
		}
	}
}

// sampleOnce reads every sampled queue once.
func (s *sampler) sampleOnce() {
	ctx, cancel := context.WithTimeout(context.Background(), SampleInterval)
	defer cancel()
	qs, err := s.queues(ctx)
	if err != nil {
		return
	}
	list, err := qs.ListQueues(ctx, "")
	if err != nil {
		return
	}
	if len(list) > sampledQueuesMax {
		list = list[:sampledQueuesMax]
	}
	names := map[string]bool{}
	for _, q := range list {
		st, err := qs.QueueStats(ctx, q.Name)
		if err != nil {
			continue
		}
		names[q.Name] = true
		s.record(q.Name, sampleOf(time.Now(), st))
	}
	s.mu.Lock()
	for name := range s.rings {
		if !names[name] {
			delete(s.rings, name) // deleted, or no longer among the sampled
		}
	}
	s.mu.Unlock()
}

// record adds a sample to a queue's ring.
func (s *sampler) record(queue string, smp Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rings[queue]
	if r == nil {
		if len(s.rings) >= sampledQueuesMax {
			return
		}
		r = &ring{}
		s.rings[queue] = r
	}
	r.add(smp)
}

// samples returns a queue's samples, oldest first.
func (s *sampler) samples(queue string) []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rings[queue]; r != nil {
		return r.list()
	}
	return nil
}

// sampledQueues lists the queues with samples, sorted.
func (s *sampler) sampledQueues() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.rings))
	for name := range s.rings {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
