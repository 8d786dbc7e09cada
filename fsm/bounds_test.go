package fsm

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// rejectAll leases and rejects n messages sent as ids p0, p1, ..., one per
// second.
func rejectAll(h *harness, prefix string, n int) {
	h.t.Helper()
	for i := range n {
		h.send(fmt.Sprintf("%s%d", prefix, i), "", "body")
		d := h.receiveOne("c")
		wantNoErr(h.t, h.reject(d.Receipt, "bad"))
		h.advance(time.Second)
	}
}

func TestFSM_DeadLettersStopAtCountCapOldestFirst(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxDead = 3 })
	rejectAll(h, "m", 5)
	st := h.stats()
	if st.Dead != 3 || st.Counters.DeadEvicted != 2 || st.Counters.DeadLettered != 5 {
		t.Fatalf("dead %d, evicted %d, dead-lettered %d; want 3, 2, 5", st.Dead, st.Counters.DeadEvicted, st.Counters.DeadLettered)
	}
	ds, err := h.f.ListDead(DeadFilter{})
	wantNoErr(t, err)
	if got := deadIDs(ds); fmt.Sprint(got) != "[m2 m3 m4]" {
		t.Fatalf("kept %v, want the newest three", got)
	}
	// A lower cap applies as soon as it is set.
	cfg := h.f.Config()
	cfg.MaxDead = 1
	if r := h.apply(Command{Type: CmdSetConfig, SetConfig: &cfg}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if st := h.stats(); st.Dead != 1 || st.Counters.DeadEvicted != 4 {
		t.Fatalf("after lowering the cap: dead %d, evicted %d", st.Dead, st.Counters.DeadEvicted)
	}
}

func TestFSM_DeadLettersStopAtByteCap(t *testing.T) {
	// Each dead letter stores 2 + 4 bytes ("body").
	h := newHarness(t, func(c *QueueConfig) { c.MaxDead, c.MaxDeadBytes = 0, 13 })
	rejectAll(h, "m", 4)
	st := h.stats()
	if st.Dead != 2 || st.DeadBytes != 12 || st.Counters.DeadEvicted != 2 {
		t.Fatalf("dead %d (%d bytes), evicted %d; want 2 (12 bytes), 2", st.Dead, st.DeadBytes, st.Counters.DeadEvicted)
	}
}

func TestFSM_DeadRetentionExpiresByTick(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.DeadRetention, c.DedupWindow = 10*time.Second, 0 })
	rejectAll(h, "m", 3) // dead at t0, t0+1s, t0+2s
	if at, ok := h.f.NextDeadline(); !ok || at != t0+int64(10*time.Second) {
		t.Fatalf("next deadline %d %v, want the first dead letter's expiry", at-t0, ok)
	}
	h.now = t0 + int64(11*time.Second)
	h.tick()
	st := h.stats()
	if st.Dead != 1 || st.Counters.DeadExpired != 2 || st.Counters.DeadEvicted != 0 {
		t.Fatalf("dead %d, expired %d, evicted %d; want 1, 2, 0", st.Dead, st.Counters.DeadExpired, st.Counters.DeadEvicted)
	}
	h.now = t0 + int64(12*time.Second)
	h.tick()
	if st := h.stats(); st.Dead != 0 || st.DeadBytes != 0 || st.Counters.DeadExpired != 3 {
		t.Fatalf("dead %d, expired %d; want 0, 3", st.Dead, st.Counters.DeadExpired)
	}
	if _, ok := h.f.NextDeadline(); ok {
		t.Fatal("a deadline is left with nothing pending")
	}
}

func TestFSM_DedupWindowStopsAtIDCap(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.DedupMaxIDs = 2 })
	h.send("a", "", "x")
	h.advance(time.Second)
	h.send("b", "", "x")
	h.send("c", "", "x") // "a" leaves the window early
	st := h.stats()
	if st.Counters.DedupEvicted != 1 || h.f.dedup.len() != 2 {
		t.Fatalf("evicted %d, %d ids; want 1, 2", st.Counters.DedupEvicted, h.f.dedup.len())
	}
	out := h.sendMsgs(NewMessage{ID: "b", Body: []byte("x")})
	if !out[0].Duplicate {
		t.Fatal("b, still in the window, was not a duplicate")
	}
	out = h.sendMsgs(NewMessage{ID: "a", Body: []byte("x")})
	if out[0].Duplicate || out[0].Err != nil {
		t.Fatalf("a, evicted, answered %+v; want a new message", out[0])
	}
	if st := h.stats(); st.Counters.DedupEvicted != 2 || st.Counters.Duplicates != 1 {
		t.Fatalf("evicted %d, duplicates %d; want 2, 1", st.Counters.DedupEvicted, st.Counters.Duplicates)
	}
	// The window still slides by time after evictions.
	h.advance(5 * time.Minute)
	h.tick()
	if h.f.dedup.len() != 0 || h.f.marks.len() != 0 {
		t.Fatalf("%d ids and %d marks left after the window", h.f.dedup.len(), h.f.marks.len())
	}
}

func TestFSM_BoundsSurviveSnapshot(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.MaxDead, c.DeadRetention, c.DedupMaxIDs = 2, time.Hour, 3 })
	rejectAll(h, "m", 4)
	c, err := New(DefaultQueueConfig(), NewMemBodyStore())
	wantNoErr(t, err)
	wantNoErr(t, c.Restore(persist(t, h.f)))
	if c.Digest() != h.f.Digest() {
		t.Fatal("restored digest differs")
	}
	if got := c.Config(); got.MaxDead != 2 || got.DeadRetention != time.Hour || got.DedupMaxIDs != 3 {
		t.Fatalf("restored config %+v", got)
	}
}

// legacyConfig is QueueConfig as it was encoded before the bounds on dead
// letters and the dedup table existed.
type legacyConfig struct {
	VisibilityTimeout time.Duration `msgpack:"visibility_timeout"`
	MaxReceives       int           `msgpack:"max_receives"`
	BackoffBase       time.Duration `msgpack:"backoff_base"`
	BackoffMax        time.Duration `msgpack:"backoff_max"`
	DedupWindow       time.Duration `msgpack:"dedup_window"`
	MaxMessageBytes   int           `msgpack:"max_message_bytes"`
	MaxDepth          int64         `msgpack:"max_depth"`
	MaxBytes          int64         `msgpack:"max_bytes"`
	Retention         time.Duration `msgpack:"retention"`
}

func TestFSM_LegacyConfigDecodesWithDefaultBounds(t *testing.T) {
	old := legacyConfig{VisibilityTimeout: time.Second, MaxReceives: 3, BackoffMax: time.Second,
		DedupWindow: time.Minute, MaxMessageBytes: 100, MaxDepth: 7}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	wantNoErr(t, enc.Encode(&commandHeader{Type: CmdSetConfig, At: t0}))
	wantNoErr(t, enc.Encode(&old))
	c, err := DecodeCommand(buf.Bytes())
	wantNoErr(t, err)
	want := QueueConfig{VisibilityTimeout: time.Second, MaxReceives: 3, BackoffMax: time.Second,
		DedupWindow: time.Minute, MaxMessageBytes: 100, MaxDepth: 7,
		MaxDead: DefaultMaxDead, MaxDeadBytes: DefaultMaxDeadBytes, DedupMaxIDs: DefaultDedupMaxIDs}
	if *c.SetConfig != want {
		t.Fatalf("decoded %+v, want %+v", *c.SetConfig, want)
	}
	// An explicit 0 stays 0 ("no cap").
	none := want
	none.MaxDead, none.MaxDeadBytes, none.DedupMaxIDs = 0, 0, 0
	data, err := EncodeCommand(Command{Type: CmdSetConfig, At: t0, SetConfig: &none})
	wantNoErr(t, err)
	c, err = DecodeCommand(data)
	wantNoErr(t, err)
	if *c.SetConfig != none {
		t.Fatalf("decoded %+v, want %+v", *c.SetConfig, none)
	}
}

func TestFSM_LegacySnapshotHeaderDecodesWithDefaultBounds(t *testing.T) {
	type legacyHeader struct {
		Version  int          `msgpack:"version"`
		Config   legacyConfig `msgpack:"config"`
		Clock    int64        `msgpack:"clock"`
		LastSeq  uint64       `msgpack:"last_seq"`
		Messages int          `msgpack:"messages"`
		Dedup    int          `msgpack:"dedup"`
	}
	var buf bytes.Buffer
	h := legacyHeader{Version: snapshotVersionCompact, Clock: t0,
		Config: legacyConfig{VisibilityTimeout: time.Second, BackoffMax: time.Second, MaxMessageBytes: 100}}
	wantNoErr(t, msgpack.NewEncoder(&buf).Encode(&h))
	f, err := New(DefaultQueueConfig(), NewMemBodyStore())
	wantNoErr(t, err)
	wantNoErr(t, f.Restore(&buf))
	cfg := f.Config()
	if cfg.MaxDead != DefaultMaxDead || cfg.MaxDeadBytes != DefaultMaxDeadBytes || cfg.DedupMaxIDs != DefaultDedupMaxIDs ||
		cfg.DeadRetention != 0 || cfg.MaxMessageBytes != 100 {
		t.Fatalf("restored config %+v", cfg)
	}
}

func TestFSM_ValidateBounds(t *testing.T) {
	for _, mutate := range []func(*QueueConfig){
		func(c *QueueConfig) { c.MaxDead = -1 },
		func(c *QueueConfig) { c.MaxDead = MaxDeadLimit + 1 },
		func(c *QueueConfig) { c.MaxDeadBytes = -1 },
		func(c *QueueConfig) { c.DeadRetention = -1 },
		func(c *QueueConfig) { c.DeadRetention = RetentionMax + 1 },
		func(c *QueueConfig) { c.DedupMaxIDs = -1 },
		func(c *QueueConfig) { c.DedupMaxIDs = DedupMaxIDsLimit + 1 },
	} {
		c := DefaultQueueConfig()
		mutate(&c)
		wantErrIs(t, c.Validate(), ErrInvalidConfig)
	}
}
