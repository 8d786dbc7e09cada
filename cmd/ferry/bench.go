package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/timerslack"
	"github.com/spf13/cobra"
)

// benchFlags are the settings every bench mode shares.
type benchFlags struct {
	clients    int
	size       int
	partitions int
	msgs       int
	duration   time.Duration
	keep       bool
	quiet      bool
	cpuProfile string
	timerSlack time.Duration
}

// benchCmd is `ferry bench`: workloads shaped like the ones other brokers
// are measured with, run against a queue the bench creates and deletes.
func benchCmd(g *globals) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure publish, consume and end-to-end throughput and latency",
		Long: "Each mode creates its queue (it must not exist), runs --clients connections against it,\n" +
			"prints msgs/s and latency percentiles (p50/p90/p99/p99.9/max) and deletes the queue\n" +
			"(unless --keep). A run ends after --msgs messages, or after --duration when --msgs is 0.",
	}
	pf := cmd.PersistentFlags()
	pf.IntVarP(&f.clients, "clients", "c", 1, "client connections, each with its own workers")
	pf.IntVar(&f.size, "size", 256, "body bytes")
	pf.IntVar(&f.partitions, "partitions", 1, "partitions of the queue")
	pf.IntVarP(&f.msgs, "msgs", "n", 0, "messages in all (0: run for --duration)")
	pf.DurationVarP(&f.duration, "duration", "d", 10*time.Second, "how long to run when --msgs is 0")
	pf.BoolVar(&f.keep, "keep", false, "leave the queue in place afterwards")
	pf.BoolVar(&f.quiet, "no-progress", false, "no live progress on the terminal")
	pf.StringVar(&f.cpuProfile, "cpu-profile", "", "write the bench client's own CPU profile of the run to this file")
	pf.DurationVar(&f.timerSlack, "timer-slack", benchTimerSlack,
		"how late the kernel may wake the bench's threads from timed sleeps, as ferryd's -timer-slack (Linux; 0 leaves them as started)")
	cmd.AddCommand(benchPubCmd(g, f), benchConsumeCmd(g, f), benchE2ECmd(g, f), benchQueuesCmd(g, f))
	return cmd
}

// benchEnv is one run's clients and queue.
type benchEnv struct {
	g       *globals
	f       *benchFlags
	queue   string
	admin   *client.Client
	clients []*client.Client
	ctx     context.Context
	done    []func() // closes admin, then each client
}

// setupBench checks the flags, creates the queue and dials the clients.
func setupBench(cmd *cobra.Command, g *globals, f *benchFlags, queue string) (*benchEnv, error) {
	switch {
	case f.clients < 1 || f.clients > 1024:
		return nil, fmt.Errorf("--clients %d: want 1..1024", f.clients)
	case f.size < 0 || f.size > 1<<20:
		return nil, fmt.Errorf("--size %d: want 0..1048576", f.size)
	case f.msgs < 0:
		return nil, fmt.Errorf("--msgs %d: want 0 or more", f.msgs)
	case f.msgs == 0 && f.duration <= 0:
		return nil, fmt.Errorf("--duration %v: want more than 0 when --msgs is 0", f.duration)
	}
	if err := applyBenchTimerSlack(f.timerSlack); err != nil {
		return nil, err
	}
	admin, ctx, done, err := g.connect(cmd)
	if err != nil {
		return nil, err
	}
	e := &benchEnv{g: g, f: f, queue: queue, admin: admin, ctx: cmd.Context(), done: []func(){done}}
	if err := admin.CreateQueue(ctx, queue, client.Partitions(f.partitions)); err != nil {
		done()
		if errors.Is(err, client.ErrQueueExists) {
			return nil, fmt.Errorf("the bench makes its own queue and deletes it after; name another or remove it first: %w", err)
		}
		return nil, err
	}
	for range f.clients {
		c, _, done, err := g.connect(cmd)
		if err != nil {
			e.close()
			return nil, err
		}
		e.clients = append(e.clients, c)
		e.done = append(e.done, done)
	}
	if err := e.warmUp(ctx); err != nil {
		e.close()
		return nil, err
	}
	if err := e.startProfile(); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// startProfile starts the CPU profile --cpu-profile asks for; close stops
// it.
func (e *benchEnv) startProfile() error {
	if e.f.cpuProfile == "" {
		return nil
	}
	out, err := os.Create(e.f.cpuProfile)
	if err != nil {
		return fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return fmt.Errorf("--cpu-profile: %w", err)
	}
	e.done = append(e.done, func() {
		pprof.StopCPUProfile()
		if err := out.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "ferry: bench: --cpu-profile: %v\n", err)
		}
	})
	return nil
}

// warmUp sends one message from every client, so that the partitions have
// leaders and the clients know them before the clock starts, then purges.
func (e *benchEnv) warmUp(ctx context.Context) error {
	for _, c := range e.clients {
		// Messages are spread over the partitions by their ids: a few
		// per partition reach each with high probability.
		for range 4 * e.f.partitions {
			if _, err := c.Queue(e.queue).Send(ctx, client.Message{}); err != nil {
				return fmt.Errorf("warm-up send: %w", err)
			}
		}
	}
	_, err := e.admin.Purge(ctx, e.queue)
	return err
}

// close deletes the queue (unless --keep) and closes the clients.
func (e *benchEnv) close() {
	for _, done := range e.done[1:] {
		done()
	}
	if !e.f.keep {
		ctx, cancel := context.WithTimeout(context.Background(), e.g.timeout)
		if err := e.admin.DeleteQueue(ctx, e.queue); err != nil {
			fmt.Fprintf(os.Stderr, "ferry: bench: queue %s not deleted: %v\n", e.queue, err)
		}
		cancel()
	}
	e.done[0]()
}

// benchResult is what one run measured.
type benchResult struct {
	Mode       string
	Clients    int
	Workers    int // per client
	Size       int
	Messages   int64
	Errors     int64
	FirstError string
	Elapsed    time.Duration
	Latency    latencySummary  // per call: confirm, or receive + ack
	MaxStall   time.Duration   // the longest time without a completed call
	EndToEnd   *latencySummary // send to handler, e2e only
	TimerSlack time.Duration   // the bench's threads' timer slack (0 where unknown)
}

// perSecond is the run's throughput.
func (r benchResult) perSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Messages) / r.Elapsed.Seconds()
}

// view is the result in JSON form (latencies in milliseconds).
func (r benchResult) view() map[string]any {
	v := map[string]any{
		"mode": r.Mode, "clients": r.Clients, "workers_per_client": r.Workers, "size": r.Size,
		"messages": r.Messages, "errors": r.Errors, "elapsed_s": r.Elapsed.Seconds(),
		"msgs_per_s": r.perSecond(), "latency": r.Latency.view(), "max_stall_ms": millis(r.MaxStall),
		"timer_slack_ms": millis(r.TimerSlack),
	}
	if r.FirstError != "" {
		v["first_error"] = r.FirstError
	}
	if r.EndToEnd != nil {
		v["end_to_end"] = r.EndToEnd.view()
	}
	return v
}

// print writes the result as text, or JSON with --json.
func (r benchResult) print(json bool) error {
	if json {
		return printJSON(r.view())
	}
	fmt.Printf("%s: %d clients x %d workers, %d B bodies, %v, timer slack %v\n", r.Mode, r.Clients, r.Workers, r.Size,
		r.Elapsed.Round(time.Millisecond), r.TimerSlack)
	fmt.Printf("%d messages (%d errors): %.0f msgs/s\n", r.Messages, r.Errors, r.perSecond())
	if r.FirstError != "" {
		fmt.Printf("first error: %s\n", r.FirstError)
	}
	if r.Latency.Count > 0 {
		fmt.Printf("latency  %v\n", r.Latency)
		if r.MaxStall > 0 {
			fmt.Printf("longest time without a completed call %v\n", roundLatency(r.MaxStall))
		}
	}
	if r.EndToEnd != nil {
		fmt.Printf("end to end  %v\n", *r.EndToEnd)
	}
	return nil
}

// tally collects the outcome of a run's workers.
type tally struct {
	msgs   atomic.Int64
	errs   atomic.Int64
	mu     sync.Mutex
	first  string
	hists  []*latencies
	claims atomic.Int64 // messages handed to workers so far (count-bound runs)
	start  time.Time    // when the run began
	last   atomic.Int64 // when a call last completed, in nanoseconds since start
	stall  atomic.Int64 // the longest gap between completed calls, in nanoseconds
}

// completed notes a call that completed now, for the longest stall (a
// failover shows as one).
func (t *tally) completed() {
	now := int64(time.Since(t.start))
	prev := t.last.Swap(now)
	for gap := now - prev; ; {
		old := t.stall.Load()
		if gap <= old || t.stall.CompareAndSwap(old, gap) {
			return
		}
	}
}

// failed counts an error, keeping the first one's text.
func (t *tally) failed(err error) {
	if t.errs.Add(1) == 1 {
		t.mu.Lock()
		t.first = err.Error()
		t.mu.Unlock()
	}
}

// hist returns a new worker histogram, merged into the result later.
func (t *tally) hist() *latencies {
	h := newLatencies()
	t.mu.Lock()
	t.hists = append(t.hists, h)
	t.mu.Unlock()
	return h
}

// claim hands out up to n messages of a count-bound run (total > 0); it
// returns 0 once all are handed out.
func (t *tally) claim(n, total int) int {
	if total <= 0 {
		return n
	}
	after := t.claims.Add(int64(n))
	left := int64(total) - (after - int64(n))
	return int(max(0, min(int64(n), left)))
}

// result fills in r from the tally.
func (t *tally) result(r benchResult, elapsed time.Duration) benchResult {
	all := newLatencies()
	t.mu.Lock()
	all.merge(t.hists...)
	r.FirstError = t.first
	t.mu.Unlock()
	r.Messages, r.Errors, r.Elapsed, r.Latency = t.msgs.Load(), t.errs.Load(), elapsed, all.summary()
	r.MaxStall = time.Duration(t.stall.Load())
	r.TimerSlack, _ = timerslack.Get() // every thread has the one the bench set or started with
	return r
}

// body returns a body of size bytes.
func benchBody(size int) []byte {
	return []byte(strings.Repeat("x", size))
}

// runUntil is the context of a run: done after d unless msgs bounds it.
func runUntil(parent context.Context, f *benchFlags) (context.Context, context.CancelFunc) {
	if f.msgs > 0 {
		return context.WithCancel(parent)
	}
	return context.WithTimeout(parent, f.duration)
}
