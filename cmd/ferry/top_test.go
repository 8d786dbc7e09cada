package main

import (
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/ferrymq/ferry/client"
)

func topQ(name string, ready, inflight, dead int64, oldest time.Duration, sent, acked uint64, leaders ...string) topQueue {
	return topQueue{Name: name, Leaders: leaders, Total: client.PartitionStats{Ready: ready, InFlight: inflight, Dead: dead,
		OldestEligibleAge: int64(oldest), Counters: client.Counters{Sent: sent, Acked: acked}}}
}

// rowOrder returns the queue names in the order the view lists them.
func rowOrder(view string, names ...string) []string {
	type pos struct {
		name string
		at   int
	}
	var ps []pos
	for _, n := range names {
		if i := strings.Index(view, "\n"+n+" "); i >= 0 {
			ps = append(ps, pos{n, i})
		}
	}
	for i := range ps {
		for j := i + 1; j < len(ps); j++ {
			if ps[j].at < ps[i].at {
				ps[i], ps[j] = ps[j], ps[i]
			}
		}
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.name)
	}
	return out
}

func update(t *testing.T, m topModel, msg tea.Msg) (topModel, tea.Cmd) {
	t.Helper()
	next, cmd := m.Update(msg)
	return next.(topModel), cmd
}

func TestTop_SortsRatesLeadersAndKeys(t *testing.T) {
	m := newTopModel(func(context.Context) topSnapshot { return topSnapshot{} }, time.Second)
	if v := m.View(); !strings.Contains(v, "reading the cluster") {
		t.Fatalf("first view: %q", v)
	}
	t0 := time.Unix(1000, 0)
	m, cmd := update(t, m, topSnapshot{At: t0, Nodes: 3, Queues: []topQueue{
		topQ("small", 1, 0, 0, time.Hour, 10, 0, "n1"),
		topQ("big", 50, 10, 3, time.Second, 100, 0, "n1", "n2"),
	}})
	if cmd == nil {
		t.Fatal("a snapshot must schedule the next refresh")
	}
	if got := rowOrder(m.View(), "small", "big"); strings.Join(got, ",") != "big,small" {
		t.Fatalf("by depth: %v\n%s", got, m.View())
	}
	if strings.Contains(m.View(), "2.0") {
		t.Fatal("rates shown before two readings")
	}
	m, _ = update(t, m, topSnapshot{At: t0.Add(2 * time.Second), Nodes: 3, Queues: []topQueue{
		topQ("small", 1, 0, 0, time.Hour, 14, 2, "n1"),
		topQ("big", 50, 10, 3, time.Second, 100, 0, "n1", "n2"),
	}})
	v := m.View()
	if !regexp.MustCompile(`\nsmall +1 +0 +0 +0 +1h0m0s +2\.0 +1\.0 +0\.0 +0\.0 +0:n1\n`).MatchString(v) {
		t.Errorf("small's row (ready, in flight, delayed, dead, oldest, rates, leaders) is wrong:\n%s", v)
	}
	for _, want := range []string{"0:n1 1:n2", "partitions led: n1 2, n2 1", "3 nodes · 2 queues"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	paused := topQ("big", 50, 10, 3, time.Second, 100, 0, "n1", "n2")
	paused.Total.Paused, paused.Total.PausedBy = true, "oncall"
	pm, _ := update(t, m, topSnapshot{At: t0.Add(2 * time.Second), Nodes: 3, Queues: []topQueue{paused}})
	if v := pm.View(); !strings.Contains(v, "big PAUSED by oncall ") {
		t.Errorf("a paused queue's row does not say so:\n%s", v)
	}
	m, _ = update(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("s")})
	if got := rowOrder(m.View(), "small", "big"); strings.Join(got, ",") != "small,big" || !strings.Contains(m.View(), "sorted by oldest age") {
		t.Fatalf("by age: %v\n%s", got, m.View())
	}
	m, _ = update(t, m, topSnapshot{At: t0.Add(3 * time.Second), Err: errors.New("unavailable: no leader")})
	if v := m.View(); !strings.Contains(v, "error: unavailable: no leader") || !strings.Contains(v, "small") {
		t.Fatalf("an error keeps the last figures and shows itself:\n%s", v)
	}
	if _, cmd := update(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")}); cmd == nil || cmd() != tea.Quit() {
		t.Fatal("q does not quit")
	}
}

// On a real cluster: the program reads the cluster every second, shows
// the queues with their figures, and quits on q.
func TestTop_RealCluster(t *testing.T) {
	cl := startCluster(t)
	cl.createQueue(t, "top-a")
	cl.createQueue(t, "top-b")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		if _, err := cl.c.Queue("top-b").Send(ctx, client.Message{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	// The CLI's non-interactive view, through the binary.
	r := ferry(t, cl.addrs, "top", "--once")
	if r.code != 0 || strings.Join(rowOrder(r.stdout, "top-a", "top-b"), ",") != "top-b,top-a" ||
		!regexp.MustCompile(`\ntop-b +3 +0 +0 +0 `).MatchString(r.stdout) {
		t.Fatalf("ferry top --once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Without a terminal, plain `ferry top` does the same instead of
	// drawing a screen nobody sees.
	if r := ferry(t, cl.addrs, "top"); r.code != 0 || !strings.Contains(r.stdout, "partitions led:") {
		t.Fatalf("ferry top without a terminal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The interactive program, fed keys through a pipe: it must refresh
	// (two readings) and then quit on q.
	reads := make(chan topSnapshot, 16)
	fetch := fetchTop(cl.c)
	m := newTopModel(func(ctx context.Context) topSnapshot {
		s := fetch(ctx)
		reads <- s
		return s
	}, 5*time.Second)
	in, keys := io.Pipe()
	p := tea.NewProgram(m, tea.WithInput(in), tea.WithOutput(io.Discard), tea.WithContext(ctx))
	done := make(chan tea.Model, 1)
	go func() {
		final, err := p.Run()
		if err != nil {
			t.Errorf("program: %v", err)
		}
		done <- final
	}()
	for i := 0; i < 2; i++ {
		select {
		case s := <-reads:
			if s.Err != nil || len(s.Queues) != 2 {
				t.Fatalf("reading %d: %+v", i, s)
			}
		case <-ctx.Done():
			t.Fatal("no refresh")
		}
	}
	keys.Write([]byte("q"))
	select {
	case final := <-done:
		if v := final.View(); !strings.Contains(v, "top-b") {
			t.Fatalf("final view:\n%s", v)
		}
	case <-ctx.Done():
		t.Fatal("q did not quit")
	}
}
