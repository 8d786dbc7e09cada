package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/ferrymq/ferry/client"
	"github.com/spf13/cobra"
)

// Bounds of `ferry top`.
const (
	// topRefresh is how often the view is refreshed.
	topRefresh = time.Second
	// topQueuesMax bounds the queues read per refresh.
	topQueuesMax = 200
	// topStatsParallel bounds the concurrent stats calls.
	topStatsParallel = 8
)

// topSort is the order of the queue table.
type topSort int

const (
	byDepth topSort = iota // ready + in flight + delayed, largest first
	byAge                  // oldest eligible message, oldest first
)

func (s topSort) String() string {
	if s == byAge {
		return "oldest age"
	}
	return "depth"
}

// topQueue is one queue's figures in one snapshot.
type topQueue struct {
	Name    string
	Total   client.PartitionStats
	Leaders []string // leader node of each partition, by index ("" when none)
	Failed  int      // partitions whose figures could not be read
}

// topSnapshot is one reading of the cluster.
type topSnapshot struct {
	At     time.Time
	Nodes  int
	Queues []topQueue
	More   bool // more queues than topQueuesMax
	Err    error
}

// topFetch reads a snapshot; the model calls it once per refresh.
type topFetch func(ctx context.Context) topSnapshot

// fetchTop reads the placement and every queue's stats through c.
func fetchTop(c *client.Client) topFetch {
	return func(ctx context.Context) topSnapshot {
		snap := topSnapshot{At: time.Now()}
		info, err := c.Cluster(ctx)
		if err != nil {
			snap.Err = err
			return snap
		}
		snap.Nodes = len(info.Nodes)
		qs := info.Queues
		if len(qs) > topQueuesMax {
			qs, snap.More = qs[:topQueuesMax], true
		}
		snap.Queues = make([]topQueue, len(qs))
		sem := make(chan struct{}, topStatsParallel)
		var wg sync.WaitGroup
		for i, q := range qs {
			tq := topQueue{Name: q.Name, Leaders: make([]string, len(q.Partitions))}
			for _, p := range q.Partitions {
				if p.Index >= 0 && p.Index < len(tq.Leaders) {
					tq.Leaders[p.Index] = p.Leader
				}
			}
			snap.Queues[i] = tq
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				st, err := c.QueueStats(ctx, q.Name)
				if err != nil {
					snap.Queues[i].Failed = len(q.Partitions)
					return
				}
				snap.Queues[i].Total = st.Total()
				for _, p := range st.Partitions {
					if p.Err() != nil {
						snap.Queues[i].Failed++
					}
				}
			})
		}
		wg.Wait()
		return snap
	}
}

// topRates are per-second rates of one queue between two snapshots.
type topRates struct{ send, ack, nack, dead float64 }

// topModel is the bubbletea model of `ferry top`.
type topModel struct {
	fetch   topFetch
	timeout time.Duration
	sort    topSort
	cur     topSnapshot
	prev    map[string]client.Counters // counters of the previous snapshot
	prevAt  time.Time
	rates   map[string]topRates
	height  int
	loaded  bool
}

func newTopModel(fetch topFetch, timeout time.Duration) topModel {
	return topModel{fetch: fetch, timeout: timeout, rates: map[string]topRates{}}
}

type topTickMsg struct{}

// Init implements tea.Model: the first reading at once.
func (m topModel) Init() tea.Cmd { return m.read() }

// read fetches a snapshot in the background.
func (m topModel) read() tea.Cmd {
	fetch, timeout := m.fetch, m.timeout
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return fetch(ctx)
	}
}

// Update implements tea.Model.
func (m topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "ctrl+c", "esc":
			return m, tea.Quit
		case "s", "tab":
			m.sort = 1 - m.sort
		case "d":
			m.sort = byDepth
		case "o", "a":
			m.sort = byAge
		}
		return m, nil
	case tea.WindowSizeMsg:
		m.height = msg.Height
		return m, nil
	case topSnapshot:
		m = m.absorb(msg)
		return m, tea.Tick(topRefresh, func(time.Time) tea.Msg { return topTickMsg{} })
	case topTickMsg:
		return m, m.read()
	}
	return m, nil
}

// absorb takes in a snapshot and computes rates against the previous one.
func (m topModel) absorb(s topSnapshot) topModel {
	m.loaded = true
	if s.Err != nil {
		m.cur.Err = s.Err // keep the last figures on screen, with the error
		return m
	}
	dt := s.At.Sub(m.prevAt).Seconds()
	rates := map[string]topRates{}
	next := map[string]client.Counters{}
	for _, q := range s.Queues {
		k := q.Total.Counters
		next[q.Name] = k
		if old, ok := m.prev[q.Name]; ok && dt > 0 && q.Failed == 0 {
			per := func(a, b uint64) float64 {
				if b < a {
					return 0
				}
				return float64(b-a) / dt
			}
			rates[q.Name] = topRates{per(old.Sent, k.Sent), per(old.Acked, k.Acked), per(old.Nacked, k.Nacked),
				per(old.DeadLettered, k.DeadLettered)}
		}
	}
	m.cur, m.prev, m.prevAt, m.rates = s, next, s.At, rates
	return m
}

// sorted returns the queues in the chosen order (name breaks ties).
func (m topModel) sorted() []topQueue {
	qs := append([]topQueue(nil), m.cur.Queues...)
	key := func(q topQueue) int64 {
		if m.sort == byAge {
			return q.Total.OldestEligibleAge
		}
		return q.Total.Ready + q.Total.InFlight + q.Total.Delayed
	}
	sort.SliceStable(qs, func(i, j int) bool {
		if a, b := key(qs[i]), key(qs[j]); a != b {
			return a > b
		}
		return qs[i].Name < qs[j].Name
	})
	return qs
}

// View implements tea.Model.
func (m topModel) View() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ferry top · %d nodes · %d queues · sorted by %s · s: sort by %s · q: quit\n",
		m.cur.Nodes, len(m.cur.Queues), m.sort, 1-m.sort)
	switch {
	case !m.loaded:
		b.WriteString("reading the cluster…\n")
		return b.String()
	case m.cur.Err != nil:
		fmt.Fprintf(&b, "error: %v\n", m.cur.Err)
	default:
		fmt.Fprintf(&b, "updated %s\n", m.cur.At.Format("15:04:05"))
	}
	b.WriteString("\n")
	rows := [][]string{{"QUEUE", "READY", "INFLIGHT", "DELAYED", "DEAD", "OLDEST", "SEND/s", "ACK/s", "NACK/s", "DEAD/s", "LEADERS"}}
	lead := map[string]int{}
	for _, q := range m.sorted() {
		r, known := m.rates[q.Name]
		rate := func(v float64) string {
			if !known {
				return "-"
			}
			return fmt.Sprintf("%.1f", v)
		}
		leaders := make([]string, len(q.Leaders))
		for i, l := range q.Leaders {
			if l == "" {
				l = "none"
			}
			lead[l]++
			leaders[i] = fmt.Sprintf("%d:%s", i, l)
		}
		name := q.Name
		if q.Failed > 0 {
			name += fmt.Sprintf(" (%d partitions unread)", q.Failed)
		}
		t := q.Total
		if t.Paused {
			name += " PAUSED"
			if t.PausedBy != "" {
				name += " by " + t.PausedBy
			}
		}
		rows = append(rows, []string{name, fmt.Sprint(t.Ready), fmt.Sprint(t.InFlight), fmt.Sprint(t.Delayed), fmt.Sprint(t.Dead),
			topAge(t.OldestEligibleAge), rate(r.send), rate(r.ack), rate(r.nack), rate(r.dead), strings.Join(leaders, " ")})
	}
	if m.height > 8 && len(rows) > m.height-6 {
		rows = rows[:m.height-6]
	}
	b.WriteString(columns(rows))
	if m.cur.More {
		fmt.Fprintf(&b, "(only the first %d queues are read)\n", topQueuesMax)
	}
	b.WriteString("\npartitions led: ")
	names := make([]string, 0, len(lead))
	for n := range lead {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", n, lead[n])
	}
	b.WriteString("\n")
	return b.String()
}

// topAge renders an age in nanoseconds to the second, "-" for none.
func topAge(ns int64) string {
	if ns <= 0 {
		return "-"
	}
	return time.Duration(ns).Round(time.Second).String()
}

// columns aligns rows in columns two spaces apart.
func columns(rows [][]string) string {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", width[i]-len([]rune(c))+2))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func topCmd(g *globals) *cobra.Command {
	var once bool
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Live view of queues: depth, age, rates, dead letters and partition leaders",
		Long: "Shows every queue with its ready, in-flight, delayed and dead counts, the age of its oldest\n" +
			"ready message, send/ack/nack/dead-letter rates and the leader of each partition, refreshed\n" +
			"every second. Keys: s (or tab) switches the order between depth and oldest age, q quits.\n" +
			"--once (implied without a terminal) prints two readings a second apart, so rates are known, and exits.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			m := newTopModel(fetchTop(c), min(g.timeout, 5*time.Second))
			if once || !isTerminal(os.Stdout) || !isTerminal(os.Stdin) {
				return topOnce(cmd.Context(), m) // no terminal to draw on or read keys from
			}
			_, err = tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(cmd.Context())).Run()
			return err
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "print one view (two readings a second apart) and exit")
	return cmd
}

// topOnce prints one view without a terminal.
func topOnce(ctx context.Context, m topModel) error {
	for i := 0; i < 2; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(topRefresh):
			}
		}
		rctx, cancel := context.WithTimeout(ctx, m.timeout)
		m = m.absorb(m.fetch(rctx))
		cancel()
	}
	fmt.Fprint(os.Stdout, m.View())
	return m.cur.Err
}
