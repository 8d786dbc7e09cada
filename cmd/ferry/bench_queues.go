package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/spf13/cobra"
)

// queuesFlags are the settings of `ferry bench queues`.
type queuesFlags struct {
	count       int
	prefix      string
	workers     int
	traffic     time.Duration
	sendEach    bool
	deleteAfter bool
}

// Bounds of `ferry bench queues`.
const (
	benchQueuesMax       = 100_000
	benchWorkersMax      = 256
	benchCreateRetries   = 60 * time.Second // per queue, while the cluster refuses creates (rate)
	benchTrafficConnsMax = 256              // client connections of --traffic
)

// benchQueuesCmd is `ferry bench queues`: many single-partition queues,
// idle or each with a trickle of traffic, to measure what a partition
// costs a node (scripts/idle-queues.sh samples the nodes meanwhile).
func benchQueuesCmd(g *globals, bf *benchFlags) *cobra.Command {
	f := &queuesFlags{}
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "Create many queues (idle, or one message per --traffic each) and report the create rate",
		Long: "Creates --count single-partition queues named PREFIX00001... (existing ones are kept), with\n" +
			"--workers creates at once, retrying a create the cluster refuses for its rate limit.\n" +
			"With --traffic, each queue is then sent one message per interval and consumed\n" +
			"(receive + ack) for --duration. --send-each sends every queue one message (confirmed\n" +
			"by a majority) and reports the time and any failure. --delete removes the queues at the end.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchQueues(cmd, g, f, bf.duration) },
	}
	fl := cmd.Flags()
	fl.IntVar(&f.count, "count", 1000, "queues to have, 1..100000")
	fl.StringVar(&f.prefix, "prefix", "idle-", "queue name prefix")
	fl.IntVar(&f.workers, "workers", 16, "creates in flight at once, 1..256")
	fl.DurationVar(&f.traffic, "traffic", 0, "send one message to each queue this often, and consume it, for --duration (0: idle)")
	fl.BoolVar(&f.sendEach, "send-each", false, "send one message to every queue and report how many were confirmed and how long it took")
	fl.BoolVar(&f.deleteAfter, "delete", false, "delete the queues at the end")
	return cmd
}

func runBenchQueues(cmd *cobra.Command, g *globals, f *queuesFlags, run time.Duration) error {
	switch {
	case f.count < 1 || f.count > benchQueuesMax:
		return fmt.Errorf("--count %d: want 1..%d", f.count, benchQueuesMax)
	case f.workers < 1 || f.workers > benchWorkersMax:
		return fmt.Errorf("--workers %d: want 1..%d", f.workers, benchWorkersMax)
	case f.traffic < 0 || (f.traffic > 0 && run <= 0):
		return fmt.Errorf("--traffic %v --duration %v: want a traffic interval of 0 or more, and a positive duration with it", f.traffic, run)
	}
	c, _, done, err := g.connect(cmd)
	if err != nil {
		return err
	}
	defer done()
	ctx := cmd.Context()
	names := make([]string, f.count)
	for i := range names {
		names[i] = fmt.Sprintf("%s%05d", f.prefix, i+1)
	}
	start := time.Now()
	created, err := createQueues(ctx, c, names, f.workers)
	took := time.Since(start)
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "queues: %d created, %d already there, in %v (%.0f creates/s)\n",
		created, len(names)-created, took.Round(time.Millisecond), float64(created)/max(took.Seconds(), 1e-3))
	if err != nil {
		return err
	}
	if f.traffic > 0 {
		// A node serves at most 256 requests of one connection at once, and
		// every queue holds a long poll: a connection per 64 queues.
		clients := []*client.Client{c}
		for len(clients) < min((len(names)+63)/64, benchTrafficConnsMax) {
			tc, _, tdone, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer tdone()
			clients = append(clients, tc)
		}
		if err := trickle(ctx, clients, names, f.traffic, run, out); err != nil {
			return err
		}
	}
	if f.sendEach {
		if err := sendEach(ctx, c, names, f.workers, out); err != nil {
			return err
		}
	}
	if f.deleteAfter {
		return forEachQueue(names, f.workers, func(name string) error { return c.DeleteQueue(ctx, name) })
	}
	return nil
}

// sendEach sends one message to every queue and prints how many were
// confirmed, in how long; the first failure is returned.
func sendEach(ctx context.Context, c *client.Client, names []string, workers int, out io.Writer) error {
	var confirmed, failed atomic.Int64
	start := time.Now()
	err := forEachQueue(names, workers, func(name string) error {
		if _, err := c.Queue(name).Send(ctx, client.Message{Body: []byte("each")}); err != nil {
			failed.Add(1)
			return fmt.Errorf("send to %s: %w", name, err)
		}
		confirmed.Add(1)
		return nil
	})
	fmt.Fprintf(out, "sends: %d confirmed, %d failed, one per queue, in %v\n",
		confirmed.Load(), failed.Load(), time.Since(start).Round(time.Millisecond))
	return err
}

// createQueues creates the queues that do not exist yet and returns how
// many it created.
func createQueues(ctx context.Context, c *client.Client, names []string, workers int) (int, error) {
	var created atomic.Int64
	err := forEachQueue(names, workers, func(name string) error {
		deadline := time.Now().Add(benchCreateRetries)
		pause := 20 * time.Millisecond
		for {
			err := c.CreateQueue(ctx, name, client.Partitions(1))
			switch {
			case err == nil:
				created.Add(1)
				return nil
			case errors.Is(err, client.ErrQueueExists):
				return nil
			case errors.Is(err, client.ErrLimitExceeded) && time.Now().Before(deadline):
				// The node's create rate: wait and try again.
			default:
				return fmt.Errorf("create %s: %w", name, err)
			}
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return ctx.Err()
			}
			pause = min(2*pause, time.Second)
		}
	})
	return int(created.Load()), err
}

// forEachQueue runs fn for every name on workers goroutines and returns
// the first error (the others still run).
func forEachQueue(names []string, workers int, fn func(string) error) error {
	next := make(chan string)
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(workers, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range next {
				if err := fn(name); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for _, n := range names {
		next <- n
	}
	close(next)
	wg.Wait()
	return first
}

// trickle sends each queue one message per interval and consumes it, for
// run, then prints what went through.
func trickle(ctx context.Context, clients []*client.Client, names []string, every, run time.Duration, out interface{ Write([]byte) (int, error) }) error {
	ctx, cancel := context.WithTimeout(ctx, run)
	defer cancel()
	var sent, acked, failed atomic.Int64
	var wg sync.WaitGroup
	for i, name := range names {
		q := clients[i%len(clients)].Queue(name)
		wg.Add(2)
		go func() {
			defer wg.Done()
			// Spread the queues' sends over the interval.
			t := time.NewTimer(every * time.Duration(i) / time.Duration(len(names)))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if _, err := q.Send(ctx, client.Message{Body: []byte("tick")}); err == nil {
					sent.Add(1)
				} else if ctx.Err() == nil {
					failed.Add(1)
				}
				t.Reset(every)
			}
		}()
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 10, Wait: 5 * time.Second})
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
						time.Sleep(100 * time.Millisecond) // a failed receive is not retried at once
					}
					continue
				}
				for _, d := range ds {
					if d.Ack(context.WithoutCancel(ctx)) == nil {
						acked.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	fmt.Fprintf(out, "traffic: %d sent, %d acked, %d failed calls in %v over %d queues\n", sent.Load(), acked.Load(), failed.Load(), run, len(names))
	return nil
}
