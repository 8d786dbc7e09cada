package partition

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/syncbuf"
	"github.com/ferrymq/ferry/internal/testwait"
)

// A dead letter deleted by max_dead is logged on the leader with its count.
func TestPartition_DeadLetterEvictionIsLogged(t *testing.T) {
	var logs syncbuf.Buffer
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.Queue.MaxDead = 1
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	p := c.reps[c.leader()]
	send(t, p, "m", 2)
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 2}, time.Second)
	if err != nil || len(ds) != 2 {
		t.Fatalf("receive: %d deliveries, %v", len(ds), err)
	}
	items := []fsm.RejectItem{{Receipt: ds[0].Receipt}, {Receipt: ds[1].Receipt}}
	res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdReject, Reject: &fsm.RejectCmd{Items: items}})
	if err != nil || res.Err != nil {
		t.Fatalf("reject: %v %v", err, res.Err)
	}
	if st := p.Stats(); st.Dead != 1 || st.Counters.DeadEvicted != 1 {
		t.Fatalf("dead %d, evicted %d; want 1, 1", st.Dead, st.Counters.DeadEvicted)
	}
	testwait.Until(t, 5*time.Second, "the eviction log line", func() bool {
		out := logs.String()
		return strings.Contains(out, "dead letters deleted") && strings.Contains(out, "count=1")
	})
}
