package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/spf13/cobra"
)

func benchCmd(g *globals) *cobra.Command {
	var producers, consumers, size, batch, partitions, count int
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "bench QUEUE",
		Short: "Measure confirmed sends per second and confirm latency",
		Long: "Runs concurrent producers against QUEUE (created if missing) for --duration (or until\n" +
			"--count messages are confirmed) and reports confirmed messages per second and the\n" +
			"p50/p99/max latency of a confirm.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 0 {
				return fmt.Errorf("--count %d: want 0 (no count) or more", count)
			}
			if count > 0 && !cmd.Flags().Changed("duration") {
				duration = time.Hour // the count ends the run
			}
			c, _, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := context.WithTimeout(cmd.Context(), duration+g.timeout)
			defer cancel()
			err = c.CreateQueue(ctx, args[0], client.Partitions(partitions))
			if err != nil && !errors.Is(err, client.ErrQueueExists) {
				return err
			}
			q := c.Queue(args[0])
			consumed := startConsumers(ctx, q, consumers, duration)
			r := runBench(ctx, q, benchLoad{producers, size, batch, count}, duration)
			r.Acked = consumed()
			r.AckedPerSecond = float64(r.Acked) / r.Elapsed.Seconds()
			if g.json {
				return printJSON(r.view())
			}
			fmt.Printf("producers %d, batch %d, %d B bodies, %v\n", producers, batch, size, r.Elapsed.Round(time.Millisecond))
			fmt.Printf("confirmed %d messages (%d errors): %.0f msgs/s\n", r.Confirmed, r.Errors, r.PerSecond)
			if r.FirstError != "" {
				fmt.Printf("first error: %s\n", r.FirstError)
			}
			fmt.Printf("confirm latency p50 %v  p99 %v  max %v\n", r.P50, r.P99, r.Max)
			if consumers > 0 {
				fmt.Printf("consumers %d consumed %d messages (received, handled, acked): %.0f msgs/s\n", consumers, r.Acked, r.AckedPerSecond)
			}
			return nil
		},
	}
	cmd.Flags().IntVarP(&producers, "producers", "p", 16, "concurrent producers")
	cmd.Flags().IntVarP(&consumers, "consumers", "c", 0, "concurrent consumers receiving and acking during the run")
	cmd.Flags().IntVar(&size, "size", 256, "body bytes")
	cmd.Flags().IntVar(&batch, "batch", 1, "messages per send call")
	cmd.Flags().IntVar(&partitions, "partitions", 1, "partitions when the queue is created")
	cmd.Flags().DurationVarP(&duration, "duration", "d", 10*time.Second, "how long to send")
	cmd.Flags().IntVar(&count, "count", 0, "stop once this many messages are sent (0: run for --duration)")
	return cmd
}

// benchResult is what a bench run measured.
type benchResult struct {
	Confirmed, Errors int
	FirstError        string
	Elapsed           time.Duration
	PerSecond         float64
	Acked             int64
	AckedPerSecond    float64
	P50, P99, Max     time.Duration
}

// view is the result in the JSON conventions of jsonview.
func (r benchResult) view() any {
	return struct {
		Confirmed      int               `json:"confirmed"`
		Errors         int               `json:"errors"`
		FirstError     string            `json:"first_error,omitempty"`
		Elapsed        jsonview.Duration `json:"elapsed"`
		PerSecond      float64           `json:"per_second"`
		Acked          int64             `json:"acked"`
		AckedPerSecond float64           `json:"acked_per_second"`
		P50            jsonview.Duration `json:"p50"`
		P99            jsonview.Duration `json:"p99"`
		Max            jsonview.Duration `json:"max"`
	}{r.Confirmed, r.Errors, r.FirstError, jsonview.Duration(r.Elapsed), r.PerSecond, r.Acked, r.AckedPerSecond,
		jsonview.Duration(r.P50), jsonview.Duration(r.P99), jsonview.Duration(r.Max)}
}

// benchLoad is what the producers send: count messages in all (0: no
// count), in batches of batch bodies of size bytes.
type benchLoad struct {
	producers, size, batch, count int
}

func runBench(ctx context.Context, q *client.Queue, load benchLoad, d time.Duration) benchResult {
	var mu sync.Mutex
	var lat []time.Duration
	var r benchResult
	body := make([]byte, load.size)
	start := time.Now()
	until := start.Add(d)
	var wg sync.WaitGroup
	var claimed atomic.Int64
	batch := load.batch
	for range load.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(until) && ctx.Err() == nil {
				n := batch
				if load.count > 0 {
					left := int64(load.count) - claimed.Add(int64(batch)) + int64(batch)
					if left <= 0 {
						return
					}
					n = int(min(int64(batch), left))
				}
				msgs := make([]client.Message, n)
				for i := range msgs {
					msgs[i] = client.Message{Body: body}
				}
				t0 := time.Now()
				_, err := q.SendBatch(ctx, msgs)
				el := time.Since(t0)
				mu.Lock()
				if err != nil {
					r.Errors++
					if r.FirstError == "" {
						r.FirstError = err.Error()
					}
				} else {
					r.Confirmed += n
					lat = append(lat, el)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	r.PerSecond = float64(r.Confirmed) / r.Elapsed.Seconds()
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50, r.P99, r.Max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	}
	return r
}

// startConsumers runs a Consume loop with n concurrent handlers that ack
// every message, until the send window ends; the returned function stops it
// and says how many messages the handlers took (each then acked).
func startConsumers(ctx context.Context, q *client.Queue, n int, d time.Duration) func() int64 {
	if n == 0 {
		return func() int64 { return 0 }
	}
	var acked atomic.Int64
	cctx, cancel := context.WithTimeout(ctx, d)
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Consume(cctx, func(context.Context, *client.Delivery) error {
			acked.Add(1)
			return nil
		}, client.ConsumeOptions{Concurrency: n, Prefetch: 4 * n, Wait: time.Second})
	}()
	return func() int64 {
		<-done
		cancel()
		return acked.Load()
	}
}
