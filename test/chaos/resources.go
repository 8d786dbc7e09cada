package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ResourceSample is one node process's resource use at one time, read from
// its /metrics.
type ResourceSample struct {
	At         time.Time `json:"at"`
	Node       string    `json:"node"`
	Start      int       `json:"start"` // which start of the node's process
	RSSBytes   int64     `json:"rss_bytes"`
	Goroutines int64     `json:"goroutines"`
	OpenFDs    int64     `json:"open_fds"`
}

// resourceMetrics maps the metric names read to the sample's fields.
var resourceMetrics = map[string]func(*ResourceSample) *int64{
	"process_resident_memory_bytes": func(s *ResourceSample) *int64 { return &s.RSSBytes },
	"go_goroutines":                 func(s *ResourceSample) *int64 { return &s.Goroutines },
	"process_open_fds":              func(s *ResourceSample) *int64 { return &s.OpenFDs },
}

// SampleResources reads every running, unpaused node's resource use.
func (c *Cluster) SampleResources(ctx context.Context) []ResourceSample {
	var out []ResourceSample
	for _, n := range c.Up() {
		n.mu.Lock()
		start := n.starts
		n.mu.Unlock()
		s := ResourceSample{At: now(), Node: n.ID, Start: start}
		if err := c.readMetrics(ctx, n, &s); err == nil {
			out = append(out, s)
		}
	}
	return out
}

func (c *Cluster) readMetrics(ctx context.Context, n *Node, s *ResourceSample) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(n, "/metrics"), nil)
	if err != nil {
		return err
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", n.ID, resp.Status)
	}
	found := 0
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		if field, ok := resourceMetrics[f[0]]; ok {
			v, err := strconv.ParseFloat(f[1], 64)
			if err == nil {
				*field(s) = int64(v)
				found++
			}
		}
	}
	if found != len(resourceMetrics) {
		return fmt.Errorf("%s: %d of %d resource metrics found", n.ID, found, len(resourceMetrics))
	}
	return sc.Err()
}

// sampleLoop samples resources every `every` until ctx ends.
func (r *run) sampleLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, every)
		got := r.c.SampleResources(sctx)
		cancel()
		r.mu.Lock()
		r.resources = append(r.resources, got...)
		r.mu.Unlock()
	}
}

// GrowthBound is how much a resource may grow over a steady soak: the
// last samples of a process may exceed its first steady ones by Factor
// plus Slack.
type GrowthBound struct {
	Factor                            float64
	RSSSlack, GoroutineSlack, FDSlack int64
}

// DefaultGrowthBound allows half as much again plus a fixed slack.
var DefaultGrowthBound = GrowthBound{Factor: 1.5, RSSSlack: 64 << 20, GoroutineSlack: 200, FDSlack: 64}

// ProcessWarmup is how long after its first sample a node process is left
// alone by ResourceGrowth: a process started (or restarted by a fault)
// under load takes that long to reconnect its clients and peers, so its
// first samples say nothing about growth.
const ProcessWarmup = 60 * time.Second

// ResourceGrowth judges each node process that lived through the steady
// part of the run (samples from steadyFrom on, and from ProcessWarmup
// after the process's first sample): the smallest of its last
// three samples against the largest of its first three, per resource. It
// returns a line per resource beyond the bound.
func ResourceGrowth(samples []ResourceSample, steadyFrom time.Time, b GrowthBound) []string {
	type proc struct {
		node  string
		start int
	}
	firstSeen := map[proc]time.Time{}
	for _, s := range samples {
		p := proc{s.Node, s.Start}
		if t, ok := firstSeen[p]; !ok || s.At.Before(t) {
			firstSeen[p] = s.At
		}
	}
	byProc := map[proc][]ResourceSample{}
	var order []proc
	for _, s := range samples {
		p := proc{s.Node, s.Start}
		if s.At.Before(steadyFrom) || s.At.Before(firstSeen[p].Add(ProcessWarmup)) {
			continue
		}
		if _, ok := byProc[p]; !ok {
			order = append(order, p)
		}
		byProc[p] = append(byProc[p], s)
	}
	var out []string
	for _, p := range order {
		ss := byProc[p]
		if len(ss) < 6 {
			continue // too short-lived to judge
		}
		for _, m := range []struct {
			name  string
			get   func(ResourceSample) int64
			slack int64
		}{
			{"rss_bytes", func(s ResourceSample) int64 { return s.RSSBytes }, b.RSSSlack},
			{"goroutines", func(s ResourceSample) int64 { return s.Goroutines }, b.GoroutineSlack},
			{"open_fds", func(s ResourceSample) int64 { return s.OpenFDs }, b.FDSlack},
		} {
			first := max(m.get(ss[0]), m.get(ss[1]), m.get(ss[2]))
			n := len(ss)
			last := min(m.get(ss[n-1]), m.get(ss[n-2]), m.get(ss[n-3]))
			if limit := int64(float64(first)*b.Factor) + m.slack; last > limit {
				out = append(out, fmt.Sprintf("%s (start #%d): %s grew from %d to %d over %v (bound %d)",
					p.node, p.start, m.name, first, last, ss[n-1].At.Sub(ss[0].At).Round(time.Second), limit))
			}
		}
	}
	return out
}

// resourceCurves writes, per node, up to `points` evenly spaced samples.
func resourceCurves(w io.Writer, samples []ResourceSample, t0 time.Time, points int) {
	byNode := map[string][]ResourceSample{}
	var nodes []string
	for _, s := range samples {
		if _, ok := byNode[s.Node]; !ok {
			nodes = append(nodes, s.Node)
		}
		byNode[s.Node] = append(byNode[s.Node], s)
	}
	for _, n := range nodes {
		ss := byNode[n]
		var parts []string
		for i := 0; i < points && len(ss) > 0; i++ {
			s := ss[i*(len(ss)-1)/max(points-1, 1)]
			parts = append(parts, fmt.Sprintf("+%ds:%dMB/%dg/%dfd", int(s.At.Sub(t0).Seconds()), s.RSSBytes>>20, s.Goroutines, s.OpenFDs))
			if len(ss) < points && i == len(ss)-1 {
				break
			}
		}
		fmt.Fprintf(w, "  %s  %s\n", n, strings.Join(parts, " "))
	}
}

// IdleSettle is how long settleIdle waits for the nodes' goroutines to come
// back down once the workload's clients have closed.
const IdleSettle = 30 * time.Second

// IdleGoroutineBound is how far above its count before the load a node's
// goroutines may stay once the load is gone: connections, long polls and
// handlers end with their clients, so what stays beyond this is a leak.
var IdleGoroutineBound = GrowthBound{Factor: 1.25, GoroutineSlack: 40}

// settleIdle samples every node until each one's goroutines are within
// IdleGoroutineBound of the first idle sample, or IdleSettle has passed,
// and returns the last samples.
func (r *run) settleIdle(ctx context.Context) []ResourceSample {
	deadline := time.Now().Add(IdleSettle)
	for {
		got := r.c.SampleResources(ctx)
		if len(IdleLeaks(r.idleBefore, got, IdleGoroutineBound)) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return got
		}
		sleep(ctx, time.Second)
	}
}

// IdleLeaks compares each node's goroutines with no load, before and after
// the run, and returns a line per node beyond the bound.
func IdleLeaks(before, after []ResourceSample, b GrowthBound) []string {
	base := map[string]int64{}
	for _, s := range before {
		base[s.Node] = s.Goroutines
	}
	var out []string
	for _, s := range after {
		first, ok := base[s.Node]
		if !ok {
			continue
		}
		if limit := int64(float64(first)*b.Factor) + b.GoroutineSlack; s.Goroutines > limit {
			out = append(out, fmt.Sprintf("%s: %d goroutines with no load after the run, %d before it (bound %d)",
				s.Node, s.Goroutines, first, limit))
		}
	}
	return out
}

// snapshotBytesSent reads every running, unpaused member's count of
// snapshot bytes streamed to peers (ferry_raft_snapshot_bytes_sent_total),
// by node id; a node that does not answer is left out.
func (c *Cluster) snapshotBytesSent(ctx context.Context) map[string]int64 {
	out := map[string]int64{}
	for _, n := range c.Up() {
		if v, err := c.readMetric(ctx, n, "ferry_raft_snapshot_bytes_sent_total"); err == nil {
			out[n.ID] = v
		}
	}
	return out
}

// readMetric reads one unlabelled metric of node n.
func (c *Cluster) readMetric(ctx context.Context, n *Node, name string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(n, "/metrics"), nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 4<<20))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			return int64(v), err
		}
	}
	return 0, fmt.Errorf("%s: no metric %s", n.ID, name)
}
