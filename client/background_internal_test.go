package client

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

// TestClient_BackgroundWorkReusesWaitingGoroutines runs a wave of
// background work that holds its goroutines at once, then a second wave
// once the first has finished: the second runs on the first wave's
// goroutines, every piece of work runs, and Close ends them all.
func TestClient_BackgroundWorkReusesWaitingGoroutines(t *testing.T) {
	c := &Client{background: make(chan func())}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	const wave = 50
	for round := range 2 {
		gate := make(chan struct{})
		var ran sync.WaitGroup
		ran.Add(wave)
		for range wave {
			if !c.goBackground(func() { <-gate; ran.Done() }) {
				t.Fatal("an open client refused background work")
			}
		}
		close(gate)
		ran.Wait()
		// backgroundWaiting counts a goroutine just before it parks in its
		// select; work handed over in between starts a new goroutine, so
		// the test waits until every one is parked.
		testwait.Until(t, 5*time.Second, "the goroutines to wait for work", func() bool {
			return c.backgroundWaiting.Load() == wave && parkedBackgroundGoroutines() == wave
		})
		if n := c.backgroundStarted.Load(); n != wave {
			t.Fatalf("round %d: %d goroutines started for %d pieces of work at a time", round, n, wave)
		}
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("background goroutines outlived the client")
	}
	if c.goBackground(func() { t.Error("work ran on a closed client") }) {
		t.Fatal("a closed client took background work")
	}
}

// parkedBackgroundGoroutines counts the goroutines blocked in
// runBackground's select.
func parkedBackgroundGoroutines() int {
	parked := 0
	for _, g := range testwait.Goroutines() {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[select") && strings.Contains(g, "client.(*Client).runBackground(") {
			parked++
		}
	}
	return parked
}
