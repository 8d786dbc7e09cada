//go:build chaosdisk

package partition

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/diskfault"
	"github.com/ferrymq/ferry/internal/testwait"
)

// While the leader's raft log writes (whole or short) or fsyncs fail,
// sends fail with ErrIO, are refused as not-leader while leadership moves,
// or are confirmed by the replica that leads next; once the faults are spent the
// partition serves again. Every confirmed message is there, and no send
// answered ErrIO was applied.
func TestPartition_InjectedLogWriteErrors(t *testing.T) {
	for _, kind := range []diskfault.Kind{diskfault.Write, diskfault.ShortWrite, diskfault.Sync} {
		t.Run(kind.String(), func(t *testing.T) { testInjectedLogWriteErrors(t, kind) })
	}
}

func testInjectedLogWriteErrors(t *testing.T, kind diskfault.Kind) {
	c := newTestCluster(t, 3, nil)
	first := c.leader()
	send(t, c.reps[first], "kept", 5)
	confirmed := map[string]bool{}
	for i := range 5 {
		confirmed[fmt.Sprintf("kept-%d", i)] = true
	}
	failedIO := map[string]bool{}

	const faults = 3
	defer diskfault.Arm("", 0)
	match := filepath.Join(c.dirs[first], "log") + string(filepath.Separator)
	if err := diskfault.ArmKind(kind, match, faults); err != nil {
		t.Fatal(err)
	}
	// Send one message at a time, each with a new id, through whichever
	// replica leads, until the faults are spent and ten more sends in a
	// row have been confirmed.
	deadline := time.Now().Add(30 * time.Second)
	streak := 0
	for n := 0; streak < 10; n++ {
		if time.Now().After(deadline) {
			t.Fatalf("no recovery within 30s: %d faults left, %d sends confirmed in a row", diskfault.Remaining(), streak)
		}
		id := fmt.Sprintf("m-%d", n)
		p := c.reps[c.leader()]
		out, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: id, Body: []byte("body " + id)}})
		switch {
		case err == nil && out[0].Err == nil:
			confirmed[id] = true
			if diskfault.Remaining() == 0 {
				streak++
			}
			continue
		case err == nil:
			t.Fatalf("send %s refused by the FSM: %v", id, out[0].Err)
		case errors.Is(err, ErrIO):
			failedIO[id] = true
		case errors.Is(err, ErrNotLeader), errors.Is(err, ErrUnknownOutcome), errors.Is(err, ErrTimeout):
		default:
			t.Fatalf("send %s while the leader's log writes fail: %v, want a retryable error", id, err)
		}
		streak = 0
	}
	if len(failedIO) == 0 {
		t.Fatal("no send failed with ErrIO")
	}
	c.converged()

	p := c.reps[c.leader()]
	seen := map[string]bool{}
	testwait.Until(t, 10*time.Second, "every message received", func() bool {
		ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: fsm.BatchMax}, 0)
		if err != nil {
			return false
		}
		for _, d := range ds {
			if seen[d.ID] {
				t.Fatalf("message %s delivered twice", d.ID)
			}
			seen[d.ID] = true
		}
		return len(ds) == 0
	})
	for id := range confirmed {
		if !seen[id] {
			t.Fatalf("confirmed message %s lost", id)
		}
	}
	for id := range failedIO {
		if seen[id] {
			t.Fatalf("message %s was answered ErrIO but applied", id)
		}
	}
}
