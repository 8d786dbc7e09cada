package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Counts are the run's plain numbers.
type Counts struct {
	Messages          int             `json:"messages"`
	Confirmed         int             `json:"confirmed"`
	Failed            int             `json:"failed"`
	Unknown           int             `json:"unknown"`
	SendAttempts      map[Outcome]int `json:"send_attempts"`
	Deliveries        int             `json:"deliveries"`
	DeliveredMessages int             `json:"delivered_messages"`
	// ExpiredOnArrival counts deliveries whose lease had already run out
	// when Receive returned them (late answers kept in a client's buffer).
	ExpiredOnArrival int            `json:"expired_on_arrival"`
	Redelivered      int            `json:"redelivered_messages"`
	Duplicates       int            `json:"duplicate_deliveries"`
	Acked            int            `json:"acked_messages"`
	Settles          map[string]int `json:"settles"`
	DeadLettered     int            `json:"dead_lettered"`
	DeadByReason     map[string]int `json:"dead_by_reason"`
	// SendFailures counts failed send attempts by error text (digits
	// folded to '#', so one cause is one line).
	SendFailures map[string]int `json:"send_failures,omitempty"`
}

// UnknownSends says what became of messages with an unconfirmed attempt.
type UnknownSends struct {
	// ConfirmedOnRetry were confirmed by a later attempt (the server's
	// dedup answered for the first).
	ConfirmedOnRetry int `json:"confirmed_on_retry"`
	// Delivered were never confirmed but were delivered: they had been
	// stored.
	Delivered int `json:"delivered"`
	// NeverSeen were never confirmed nor delivered: not stored.
	NeverSeen int `json:"never_seen"`
}

// Report is the outcome of a run: what happened, what broke.
type Report struct {
	Seed     int64         `json:"seed"`
	Nodes    int           `json:"nodes"`
	Duration time.Duration `json:"duration"`
	Started  time.Time     `json:"started"`
	DataDir  string        `json:"data_dir,omitempty"`
	Notes    []string      `json:"notes,omitempty"`
	Faults   []FaultRecord `json:"faults"`

	Counts          Counts                 `json:"counts"`
	ViolationCounts map[string]int         `json:"violation_counts"`
	Violations      []Violation            `json:"violations,omitempty"`
	Duplicates      map[string]int         `json:"duplicates_by_cause"`
	UnknownSends    UnknownSends           `json:"unknown_sends"`
	Gaps            []Gap                  `json:"availability_gaps,omitempty"`
	Latency         map[string]Percentiles `json:"latency"`
	// Resources are the nodes' sampled RSS, goroutines and open files
	// (Options.SampleEvery).
	Resources []ResourceSample `json:"resources,omitempty"`
	// IdleBefore and IdleAfter sample every node with no workload: once
	// the queues exist, and once the workload's clients have closed.
	IdleBefore []ResourceSample `json:"idle_before,omitempty"`
	IdleAfter  []ResourceSample `json:"idle_after,omitempty"`
}

func newReport() *Report {
	r := &Report{ViolationCounts: map[string]int{}, Duplicates: map[string]int{}}
	r.Counts.SendAttempts = map[Outcome]int{}
	r.Counts.Settles = map[string]int{}
	r.Counts.DeadByReason = map[string]int{}
	r.Counts.SendFailures = map[string]int{}
	for _, k := range ViolationKinds {
		r.ViolationCounts[k] = 0
	}
	return r
}

// Failed reports whether any guarantee was broken.
func (r *Report) Failed() bool {
	for _, n := range r.ViolationCounts {
		if n > 0 {
			return true
		}
	}
	return false
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Summary writes the human-readable summary table.
func (r *Report) Summary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	row := func(k string, v ...any) { fmt.Fprintf(tw, "  %s\t%s\n", k, fmt.Sprint(v...)) }
	fmt.Fprintf(tw, "ferry chaos: seed %d, %d nodes, %s\n", r.Seed, r.Nodes, r.Duration.Round(time.Second))
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "  NOTE: %s\n", n)
	}
	fmt.Fprintln(tw, "faults:")
	for _, f := range r.Faults {
		fmt.Fprintf(tw, "  %s\n", f.Line(r.Started))
	}
	c := r.Counts
	fmt.Fprintln(tw, "messages:")
	row("sent (messages)", c.Messages)
	row("confirmed / failed / unknown", c.Confirmed, " / ", c.Failed, " / ", c.Unknown)
	row("send attempts", formatMap(c.SendAttempts))
	for i, k := range topKeys(c.SendFailures, 6) {
		if i == 0 {
			row("send failures by error", "")
		}
		row("  "+k, c.SendFailures[k])
	}
	row("unknown sends", fmt.Sprintf("%d confirmed on retry, %d delivered, %d never seen",
		r.UnknownSends.ConfirmedOnRetry, r.UnknownSends.Delivered, r.UnknownSends.NeverSeen))
	row("deliveries", c.Deliveries, " of ", c.DeliveredMessages, " messages (", c.ExpiredOnArrival, " already expired when handed out)")
	row("acked (messages)", c.Acked)
	row("dead-lettered", c.DeadLettered, "  ", formatMap(c.DeadByReason))
	row("settles", formatMap(c.Settles))
	row("duplicates", c.Duplicates, " (", c.Redelivered, " messages)")
	for _, k := range sortedKeys(r.Duplicates) {
		row("  "+k, r.Duplicates[k])
	}
	fmt.Fprintln(tw, "latency (p50 / p90 / p99 / max):")
	for _, k := range sortedKeys(r.Latency) {
		p := r.Latency[k]
		row(k, fmt.Sprintf("%v / %v / %v / %v  (n=%d)", rd(p.P50), rd(p.P90), rd(p.P99), rd(p.Max), p.N))
	}
	fmt.Fprintln(tw, "availability gaps over 1s (longest first):")
	for i, g := range r.Gaps {
		if i == 8 {
			row("...", len(r.Gaps)-8, " more")
			break
		}
		row(g.What, fmt.Sprintf("%v from +%v  %s", rd(g.Span), rd(g.From.Sub(r.Started)), g.Fault))
	}
	if len(r.Resources) > 0 {
		fmt.Fprintln(tw, "resources (sampled; RSS / goroutines / open files):")
		tw.Flush()
		resourceCurves(w, r.Resources, r.Started, 12)
	}
	if len(r.IdleBefore) > 0 && len(r.IdleAfter) > 0 {
		fmt.Fprintln(tw, "with no load, before -> after the run (RSS / goroutines / open files):")
		idle := map[string]ResourceSample{}
		for _, s := range r.IdleBefore {
			idle[s.Node] = s
		}
		for _, a := range r.IdleAfter {
			if b, ok := idle[a.Node]; ok {
				row(a.Node, fmt.Sprintf("%dMB/%dg/%dfd -> %dMB/%dg/%dfd", b.RSSBytes>>20, b.Goroutines, b.OpenFDs,
					a.RSSBytes>>20, a.Goroutines, a.OpenFDs))
			}
		}
	}
	fmt.Fprintln(tw, "violations:")
	for _, k := range ViolationKinds {
		row(k, r.ViolationCounts[k])
	}
	for _, v := range r.Violations {
		fmt.Fprintf(tw, "  ! %s %s/%s %s: %s\n", v.Kind, v.Queue, v.Group, v.ID, v.Detail)
	}
	verdict := "PASS"
	if r.Failed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(tw, "verdict: %s\n", verdict)
	tw.Flush()
}

// topKeys returns the n keys of m with the largest counts, largest first.
func topKeys(m map[string]int, n int) []string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	return keys[:min(n, len(keys))]
}

// errorClass folds the digits of an error text and cuts it short, so
// that one cause (whatever partition, node or count it names) is one key.
func errorClass(text string) string {
	b := []byte(text)
	out := make([]byte, 0, len(b))
	for i, c := range b {
		if c >= '0' && c <= '9' {
			if i > 0 && b[i-1] >= '0' && b[i-1] <= '9' {
				continue
			}
			c = '#'
		}
		out = append(out, c)
	}
	const maxLen = 120
	if len(out) > maxLen {
		out = out[:maxLen]
	}
	return string(out)
}

// rd rounds a duration for display.
func rd(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func formatMap[K ~string](m map[K]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[K(k)])
	}
	return strings.Join(parts, " ")
}

// writeHistory saves the recorded history and the final state, for
// looking into a failed run.
func writeHistory(path string, h History, final Final) error {
	b, err := json.Marshal(struct {
		History History `json:"history"`
		Final   Final   `json:"final"`
	}{h, final})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// readHistory loads what writeHistory saved.
func readHistory(path string) (History, Final, error) {
	var v struct {
		History History `json:"history"`
		Final   Final   `json:"final"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	for i, d := range v.History.Deliveries {
		if d.LeasedAt.IsZero() { // saved before leased_at was recorded
			v.History.Deliveries[i].LeasedAt = d.Deadline.Add(-visibility)
		}
	}
	return v.History, v.Final, err
}
