package main

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"
)

// Latency histograms record microseconds from 1 µs to 5 minutes with three
// significant digits: a fixed few tens of KiB, whatever the run's length.
const (
	histMinMicros = 1
	histMaxMicros = int64(5 * time.Minute / time.Microsecond)
	histDigits    = 3
)

// latencySamplesMax is how many observations a worker holds before it
// folds them into its histogram. Each histogram is ~300 KiB and a run has
// one per worker (256 for -c 4 -w 64): recording each observation at
// once missed the cache twice per message, 9% of the bench client's CPU
// under pipelined sends, time the measured cluster lost on a shared
// machine. Folded in batches, neighbouring values share cache lines.
const latencySamplesMax = 4096

// latencies is one worker's latency histogram (not safe for concurrent
// use: each worker records into its own, merged at the end).
type latencies struct {
	h       *hdrhistogram.Histogram
	samples []int64 // microseconds, not yet in h
}

func newLatencies() *latencies {
	return &latencies{h: hdrhistogram.New(histMinMicros, histMaxMicros, histDigits)}
}

// record adds one observation; values past the range count as the maximum.
func (l *latencies) record(d time.Duration) {
	if l.samples == nil {
		l.samples = make([]int64, 0, latencySamplesMax)
	}
	l.samples = append(l.samples, min(max(d.Microseconds(), histMinMicros), histMaxMicros))
	if len(l.samples) == latencySamplesMax {
		l.fold()
	}
}

// fold moves the held observations into the histogram.
func (l *latencies) fold() {
	for _, us := range l.samples {
		_ = l.h.RecordValue(us)
	}
	l.samples = l.samples[:0]
}

// merge adds the observations of others.
func (l *latencies) merge(others ...*latencies) {
	l.fold()
	for _, o := range others {
		o.fold()
		l.h.Merge(o.h)
	}
}

// summary is the percentiles of a histogram.
func (l *latencies) summary() latencySummary {
	l.fold()
	at := func(q float64) time.Duration {
		return roundLatency(time.Duration(l.h.ValueAtQuantile(q)) * time.Microsecond)
	}
	return latencySummary{
		Count: l.h.TotalCount(),
		P50:   at(50), P90: at(90), P99: at(99), P999: at(99.9),
		Max: roundLatency(time.Duration(l.h.Max()) * time.Microsecond),
	}
}

// roundLatency keeps three significant digits of a latency.
func roundLatency(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// latencySummary is the percentiles of a latency distribution.
type latencySummary struct {
	Count                    int64
	P50, P90, P99, P999, Max time.Duration
}

// millis renders d in milliseconds for JSON (three decimals: microseconds).
func millis(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// view is the summary in JSON form, latencies in milliseconds.
func (s latencySummary) view() map[string]any {
	return map[string]any{
		"count": s.Count, "p50_ms": millis(s.P50), "p90_ms": millis(s.P90),
		"p99_ms": millis(s.P99), "p99_9_ms": millis(s.P999), "max_ms": millis(s.Max),
	}
}

// String renders the percentiles on one line.
func (s latencySummary) String() string {
	return fmt.Sprintf("p50 %v  p90 %v  p99 %v  p99.9 %v  max %v", s.P50, s.P90, s.P99, s.P999, s.Max)
}

// progress shows a live count on a terminal while a run goes on. Workers
// add to an atomic counter; one ticker redraws, so the hot path never
// waits on the display.
type progress struct {
	done  atomic.Int64
	stop  chan struct{}
	ended chan struct{}
}

// startProgress draws to stderr when it is a terminal and quiet is false;
// total <= 0 shows a counter without an end.
func startProgress(what string, total int64, quiet bool) *progress {
	p := &progress{stop: make(chan struct{}), ended: make(chan struct{})}
	if quiet || !isTerminal(os.Stderr) {
		close(p.ended)
		return p
	}
	if total <= 0 {
		total = -1 // a spinner with a count
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("msg"),
		progressbar.OptionClearOnFinish())
	go p.draw(bar)
	return p
}

func (p *progress) draw(bar *progressbar.ProgressBar) {
	defer close(p.ended)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_ = bar.Set64(p.done.Load())
		case <-p.stop:
			_ = bar.Finish()
			return
		}
	}
}

// add counts n more messages done.
func (p *progress) add(n int) { p.done.Add(int64(n)) }

// end stops the display.
func (p *progress) end() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.ended
}
