package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/spf13/cobra"
)

// defaultBenchQueue is the queue a bench makes when none is named.
const defaultBenchQueue = "ferry-bench"

// queueArg is the queue named on the command line, or the default.
func queueArg(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return defaultBenchQueue
}

func benchPubCmd(g *globals, f *benchFlags) *cobra.Command {
	var sync, async bool
	var inflight, batch int
	cmd := &cobra.Command{
		Use:   "pub [QUEUE]",
		Short: "Publish: --sync (one message in flight per client) or pipelined (--inflight per client)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if sync {
				inflight = 1
			}
			leastInflight := 1
			if async {
				leastInflight = 0 // the Publisher's defaults
			}
			if inflight < leastInflight || inflight > 4096 || batch < 1 || batch > client.MaxReceive {
				return fmt.Errorf("--inflight %d / --batch %d: want 1..4096 (0 with --async) / 1..1000", inflight, batch)
			}
			e, err := setupBench(cmd, g, f, queueArg(args))
			if err != nil {
				return err
			}
			defer e.close()
			mode := "pub pipelined"
			switch {
			case sync:
				mode = "pub sync"
			case async:
				return e.publishAsync(inflight).print(g.json)
			}
			r := e.publish(e.ctx, mode, inflight, batch, f.msgs)
			return r.print(g.json)
		},
	}
	cmd.Flags().BoolVar(&sync, "sync", false, "one message per call, one call in flight per client")
	cmd.Flags().IntVarP(&inflight, "inflight", "w", 64, "calls in flight per client")
	cmd.Flags().IntVar(&batch, "batch", 1, "messages per call")
	cmd.Flags().BoolVar(&async, "async", false,
		"through the client's asynchronous Publisher, --inflight messages in flight per client (0: the Publisher's defaults)")
	return cmd
}

// publishAsync publishes through one Publisher per client with up to
// inflight messages in flight each (0: the Publisher's defaults); latency
// is from Publish to confirm.
func (e *benchEnv) publishAsync(inflight int) benchResult {
	ctx, cancel := runUntil(e.ctx, e.f)
	defer cancel()
	var t tally
	p := startProgress("pub async", int64(e.f.msgs), e.f.quiet || e.g.json)
	body := benchBody(e.f.size)
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range e.clients {
		pub, err := c.Queue(e.queue).Publisher(client.PublisherOptions{MaxInFlightMessages: inflight})
		if err != nil {
			t.failed(err)
			continue
		}
		type sent struct {
			f  *client.PublishFuture
			at time.Time
		}
		futures := make(chan sent, cmp.Or(inflight, client.DefaultPublishInFlightMessages))
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(futures)
			for ctx.Err() == nil && t.claim(1, e.f.msgs) == 1 {
				at := time.Now()
				f, err := pub.Publish(ctx, client.Message{Body: body})
				if err != nil {
					if ctx.Err() == nil {
						t.failed(err)
					}
					continue
				}
				futures <- sent{f, at}
			}
			closeCtx, cancel := context.WithTimeout(context.Background(), e.g.timeout)
			defer cancel()
			_ = pub.Close(closeCtx)
		}()
		go func() {
			defer wg.Done()
			h := t.hist()
			for s := range futures {
				<-s.f.Done()
				if _, err := s.f.Wait(context.Background()); err != nil {
					t.failed(err)
					continue
				}
				h.record(time.Since(s.at))
				t.msgs.Add(1)
				p.add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	p.end()
	return t.result(benchResult{Mode: "pub async", Clients: len(e.clients), Workers: inflight, Size: e.f.size}, elapsed)
}

// publish runs inflight senders per client until total messages are sent
// (or the duration passes when total is 0).
func (e *benchEnv) publish(parent context.Context, mode string, inflight, batch, total int) benchResult {
	ctx, cancel := runUntil(parent, e.f)
	defer cancel()
	t := tally{start: time.Now()}
	p := startProgress(mode, int64(total), e.f.quiet || e.g.json)
	body := benchBody(e.f.size)
	start := t.start
	var wg sync.WaitGroup
	for _, c := range e.clients {
		q := c.Queue(e.queue)
		for range inflight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pubWorker(ctx, q, body, batch, total, &t, p)
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	p.end()
	return t.result(benchResult{Mode: mode, Clients: len(e.clients), Workers: inflight, Size: e.f.size}, elapsed)
}

// pubWorker sends batch messages per call, one call at a time.
func pubWorker(ctx context.Context, q *client.Queue, body []byte, batch, total int, t *tally, p *progress) {
	h := t.hist()
	for ctx.Err() == nil {
		n := t.claim(batch, total)
		if n == 0 {
			return
		}
		msgs := make([]client.Message, n)
		for i := range msgs {
			msgs[i].Body = body
		}
		t0 := time.Now()
		_, err := q.SendBatch(ctx, msgs)
		if err != nil {
			if ctx.Err() == nil {
				t.failed(err)
			}
			continue
		}
		h.record(time.Since(t0))
		t.completed()
		t.msgs.Add(int64(n))
		p.add(n)
	}
}

func benchConsumeCmd(g *globals, f *benchFlags) *cobra.Command {
	var batch, workers, handlers, prefetch int
	var work time.Duration
	cmd := &cobra.Command{
		Use:   "consume [QUEUE]",
		Short: "Drain a backlog of --msgs (default 50000): batched receive + batch ack, or Consume with --handlers",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.msgs == 0 {
				f.msgs = 50000
			}
			if batch < 1 || batch > client.MaxReceive || workers < 1 || handlers < 0 || prefetch < 0 {
				return fmt.Errorf("--batch %d / --workers %d / --handlers %d / --prefetch %d: want 1..1000 / >= 1 / >= 0 / >= 0",
					batch, workers, handlers, prefetch)
			}
			if work < 0 || work > time.Minute || (work > 0 && handlers == 0) {
				return fmt.Errorf("--work %s: want 0..1m, with --handlers", work)
			}
			e, err := setupBench(cmd, g, f, queueArg(args))
			if err != nil {
				return err
			}
			defer e.close()
			quiet := f.quiet
			f.quiet = true
			fill := e.publish(e.ctx, "fill", 64, 100, f.msgs)
			f.quiet = quiet
			if fill.Errors > 0 {
				return fmt.Errorf("filling the backlog: %d errors, the first: %s", fill.Errors, fill.FirstError)
			}
			var r benchResult
			if handlers > 0 {
				r = e.drainConsume(handlers, prefetch, work, int(fill.Messages))
			} else {
				r = e.drainBatched(batch, workers, int(fill.Messages))
			}
			return r.print(g.json)
		},
	}
	cmd.Flags().IntVar(&batch, "batch", 100, "messages per receive (acked together)")
	cmd.Flags().IntVar(&workers, "workers", 1, "receive loops per client")
	cmd.Flags().IntVar(&handlers, "handlers", 0, "drain through Queue.Consume with this many handlers per client")
	cmd.Flags().IntVar(&prefetch, "prefetch", 0, "Consume's prefetch per client (with --handlers; 0: chosen by Consume from its handlers' pace, up to client.DefaultPrefetchMax)")
	cmd.Flags().DurationVar(&work, "work", 0, "time each handler spends on a message, as a service's handler would (with --handlers)")
	return cmd
}

// drainBatched receives and batch-acks until total messages are acked.
func (e *benchEnv) drainBatched(batch, workers, total int) benchResult {
	ctx, cancel := context.WithTimeout(e.ctx, e.g.timeout+time.Duration(total)*time.Millisecond)
	defer cancel()
	var t tally
	p := startProgress("consume batched", int64(total), e.f.quiet || e.g.json)
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range e.clients {
		q := c.Queue(e.queue)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				batchedWorker(ctx, q, batch, total, &t, p)
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	p.end()
	return t.result(benchResult{Mode: "consume batched", Clients: len(e.clients), Workers: workers, Size: e.f.size}, elapsed)
}

// drainConsume runs Consume on every client until total messages were
// handled (each acked by Consume), each handler spending work on each.
func (e *benchEnv) drainConsume(handlers, prefetch int, work time.Duration, total int) benchResult {
	ctx, cancel := context.WithTimeout(e.ctx, e.g.timeout+time.Duration(total)*time.Millisecond)
	defer cancel()
	var t tally
	var end atomic.Int64
	p := startProgress("consume", int64(total), e.f.quiet || e.g.json)
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range e.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.Queue(e.queue).Consume(ctx, func(context.Context, *client.Delivery) error {
				if work > 0 {
					time.Sleep(work)
				}
				if t.msgs.Add(1) == int64(total) {
					end.Store(int64(time.Since(start)))
					cancel()
				}
				p.add(1)
				return nil
			}, client.ConsumeOptions{Concurrency: handlers, Prefetch: prefetch, Wait: time.Second})
			if err != nil {
				t.failed(err)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Duration(end.Load())
	if elapsed == 0 {
		elapsed = time.Since(start)
	}
	p.end()
	return t.result(benchResult{Mode: "consume handlers", Clients: len(e.clients), Workers: handlers, Size: e.f.size}, elapsed)
}

// batchedWorker receives up to batch messages at a time, the acks of each
// batch riding on the next receive (one request, one raft entry, for
// both), until total messages are acked; the last batch is acked alone.
// Latency is per receive.
func batchedWorker(ctx context.Context, q *client.Queue, batch, total int, t *tally, p *progress) {
	h := t.hist()
	var pending []*client.Delivery
	settled := func(errs []error) {
		for _, err := range errs {
			if err != nil {
				t.failed(err)
			}
		}
		t.msgs.Add(int64(len(errs)))
		p.add(len(errs))
	}
	defer func() {
		if len(pending) > 0 {
			settled(q.AckBatch(ctx, pending))
		}
	}()
	// claims counts the messages received so far, so that no worker waits
	// in one more receive while the last acks are on their way.
	for t.claims.Load() < int64(total) && ctx.Err() == nil {
		opts := client.ReceiveOptions{Max: batch, Wait: 200 * time.Millisecond}
		if len(pending) > 0 {
			opts.Wait = 0 // the acks are not held back by a long poll
		}
		t0 := time.Now()
		ds, ackErrs, err := q.ReceiveAck(ctx, pending, opts)
		if err != nil && ctx.Err() == nil {
			t.failed(err)
		}
		if len(pending) > 0 {
			settled(ackErrs)
			pending = nil
		}
		if len(ds) == 0 {
			continue
		}
		h.record(time.Since(t0))
		t.claims.Add(int64(len(ds)))
		pending = ds
	}
}

func benchE2ECmd(g *globals, f *benchFlags) *cobra.Command {
	var rate, inflight, handlers, prefetch int
	cmd := &cobra.Command{
		Use:   "e2e [QUEUE]",
		Short: "Publish at a fixed --rate and consume at once; latency from the due send time to the handler",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rate < 1 || inflight < 1 || handlers < 1 || prefetch < 0 {
				return fmt.Errorf("--rate %d / --inflight %d / --handlers %d / --prefetch %d: want >= 1 / >= 1 / >= 1 / >= 0",
					rate, inflight, handlers, prefetch)
			}
			f.size = max(f.size, 8) // the body carries the due time
			e, err := setupBench(cmd, g, f, queueArg(args))
			if err != nil {
				return err
			}
			defer e.close()
			return e.endToEnd(rate, inflight, handlers, prefetch).print(g.json)
		},
	}
	cmd.Flags().IntVar(&rate, "rate", 1000, "messages per second offered, over all clients")
	cmd.Flags().IntVarP(&inflight, "inflight", "w", 16, "sends in flight per client at most")
	cmd.Flags().IntVar(&handlers, "handlers", 8, "Consume handlers per client")
	cmd.Flags().IntVar(&prefetch, "prefetch", 0, "Consume's prefetch per client (0: chosen by Consume from its handlers' pace, up to client.DefaultPrefetchMax)")
	return cmd
}

// endToEnd publishes at rate while every client consumes; it stops
// sending after the run (duration or --msgs), waits a little for the
// consumers to catch up, and measures each message from the time its send
// was due (so a stalled sender shows as latency, not as fewer samples).
func (e *benchEnv) endToEnd(rate, inflight, handlers, prefetch int) benchResult {
	var sent, got tally
	var e2eMu sync.Mutex
	e2e := newLatencies()
	cctx, stopConsumers := context.WithCancel(e.ctx)
	defer stopConsumers()
	p := startProgress("e2e", int64(e.f.msgs), e.f.quiet || e.g.json)
	var cwg sync.WaitGroup
	for _, c := range e.clients {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			err := c.Queue(e.queue).Consume(cctx, func(_ context.Context, d *client.Delivery) error {
				due := time.Unix(0, int64(binary.BigEndian.Uint64(d.Body)))
				e2eMu.Lock()
				e2e.record(time.Since(due))
				e2eMu.Unlock()
				got.msgs.Add(1)
				p.add(1)
				return nil
			}, client.ConsumeOptions{Concurrency: handlers, Prefetch: prefetch, Wait: time.Second})
			if err != nil {
				got.failed(err)
			}
		}()
	}
	start := time.Now()
	e.pace(rate, inflight, &sent)
	for wait := time.Now().Add(5 * time.Second); got.msgs.Load() < sent.msgs.Load() && time.Now().Before(wait); {
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	stopConsumers()
	cwg.Wait()
	p.end()
	r := sent.result(benchResult{Mode: "e2e", Clients: len(e.clients), Workers: handlers, Size: e.f.size}, elapsed)
	r.Messages = got.msgs.Load()
	r.Errors += got.errs.Load()
	s := e2e.summary()
	r.EndToEnd = &s
	return r
}

// pace sends rate messages per second over all clients, each message's
// body starting with the time it was due, until the run ends.
func (e *benchEnv) pace(rate, inflight int, t *tally) {
	ctx, cancel := runUntil(e.ctx, e.f)
	defer cancel()
	interval := time.Duration(float64(time.Second) * float64(len(e.clients)) / float64(rate))
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range e.clients {
		q := c.Queue(e.queue)
		due := make(chan time.Time, inflight)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(due)
			for i := 0; ctx.Err() == nil && t.claim(1, e.f.msgs) == 1; i++ {
				at := start.Add(time.Duration(i) * interval)
				if d := time.Until(at); d > 0 {
					time.Sleep(d)
				}
				select {
				case due <- at:
				case <-ctx.Done():
				}
			}
		}()
		for range inflight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := t.hist()
				for at := range due {
					body := benchBody(e.f.size)
					binary.BigEndian.PutUint64(body, uint64(at.UnixNano()))
					if _, err := q.Send(ctx, client.Message{Body: body}); err != nil {
						if ctx.Err() == nil {
							t.failed(err)
						}
						continue
					}
					h.record(time.Since(at))
					t.msgs.Add(1)
				}
			}()
		}
	}
	wg.Wait()
}
