package fsm

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// deadSetup dead-letters five messages: three rejected (groups g, g, none)
// and two by lease expiry, at distinct times.
func deadSetup(t *testing.T) *harness {
	h := newHarness(t, func(c *QueueConfig) { c.MaxReceives = 1 })
	h.send("r1", "g", "body-r1")
	h.send("r2", "g", "body-r2")
	h.send("r3", "", "body-r3")
	h.send("x1", "", "body-x1")
	h.send("x2", "h", "body-x2")
	for _, id := range []string{"r1", "r2", "r3"} {
		ds := h.receive("c", 1, 0)
		if len(ds) != 1 || ds[0].ID != id {
			t.Fatalf("want %s, got %v", id, ids(ds))
		}
		wantNoErr(t, h.reject(ds[0].Receipt, "bad "+id))
		h.advance(time.Second)
	}
	h.receive("c", 2, time.Second)
	h.advance(time.Second)
	h.tick()
	if st := h.stats(); st.Dead != 5 {
		t.Fatalf("setup: %d dead", st.Dead)
	}
	return h
}

func deadIDs(ds []DeadLetter) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func TestFSM_ListDeadFilters(t *testing.T) {
	h := deadSetup(t)
	cases := []struct {
		name   string
		filter DeadFilter
		want   []string
	}{
		{"all", DeadFilter{}, []string{"r1", "r2", "r3", "x1", "x2"}},
		{"reason", DeadFilter{Reason: DeadLeaseExpired}, []string{"x1", "x2"}},
		{"group", DeadFilter{Group: "g"}, []string{"r1", "r2"}},
		{"from", DeadFilter{FromAt: t0 + int64(time.Second)}, []string{"r2", "r3", "x1", "x2"}},
		{"range", DeadFilter{FromAt: t0 + int64(time.Second), ToAt: t0 + int64(2*time.Second)}, []string{"r2"}},
		{"seqs", DeadFilter{Seqs: []uint64{5, 1, 1, 99}}, []string{"r1", "x2"}},
		{"after and limit", DeadFilter{AfterSeq: 1, Limit: 2}, []string{"r2", "r3"}},
		{"text", DeadFilter{Text: "bad r"}, []string{"r1", "r2", "r3"}},
		{"text expired", DeadFilter{Text: "expired"}, []string{"x1", "x2"}},
		{"seqs and group", DeadFilter{Seqs: []uint64{1, 3, 5}, Group: "g"}, []string{"r1"}},
		{"seqs and reason", DeadFilter{Seqs: []uint64{1, 4, 5}, Reason: DeadLeaseExpired}, []string{"x1", "x2"}},
		{"seqs and text", DeadFilter{Seqs: []uint64{1, 2, 3}, Text: "r2"}, []string{"r2"}},
		{"seqs and time", DeadFilter{Seqs: []uint64{1, 2, 3}, ToAt: t0 + int64(time.Second)}, []string{"r1"}},
	}
	for _, tc := range cases {
		got, err := h.f.ListDead(tc.filter)
		wantNoErr(t, err)
		if !slices.Equal(deadIDs(got), tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, deadIDs(got), tc.want)
		}
		if len(got) > 0 && got[0].Body != nil {
			t.Errorf("%s: ListDead returned bodies", tc.name)
		}
	}
	for _, bad := range []DeadFilter{{Limit: -1}, {Limit: DeadListMax + 1}, {FromAt: 5, ToAt: 4}, {Text: strings.Repeat("x", ReasonBytesMax+1)}} {
		_, err := h.f.ListDead(bad)
		wantErrIs(t, err, ErrInvalidArgument)
	}
	peek, _, err := h.f.PeekDead(DeadFilter{Group: "h"}, 0)
	wantNoErr(t, err)
	if len(peek) != 1 || string(peek[0].Body) != "body-x2" || peek[0].Group != "h" {
		t.Fatalf("peek %+v", peek)
	}
}

func TestFSM_RedriveMovesDeadLettersBackWithAttemptsReset(t *testing.T) {
	h := deadSetup(t)
	h.advance(time.Minute)
	r := h.apply(Command{Type: CmdRedrive, Redrive: &DeadFilter{Group: "g", Limit: 1}})
	if r.Err != nil || r.Count != 1 {
		t.Fatalf("redrive %+v", r)
	}
	d := h.receiveOne("c")
	if d.ID != "r1" || d.Group != "g" || string(d.Body) != "body-r1" || d.Receipt.Attempt != 1 || d.Receipt.Seq <= 5 {
		t.Fatalf("redriven delivery %+v", d)
	}
	if d.EnqueuedAt != h.now {
		t.Fatalf("enqueued at %d, want the redrive time", d.EnqueuedAt)
	}
	// Redrive all that is left, by reason then by seqs.
	r = h.apply(Command{Type: CmdRedrive, Redrive: &DeadFilter{Reason: DeadLeaseExpired}})
	if r.Count != 2 {
		t.Fatalf("redrive count %d", r.Count)
	}
	r = h.apply(Command{Type: CmdRedrive, Redrive: &DeadFilter{Seqs: []uint64{2, 3}}})
	if r.Count != 2 || h.stats().Dead != 0 || h.stats().Counters.Redriven != 5 {
		t.Fatalf("redrive count %d, stats %+v", r.Count, h.stats())
	}
	// New seqs follow redrive order; r2 waits behind r1's lease.
	if got := ids(h.receive("c", 10, 0)); !slices.Equal(got, []string{"x1", "x2", "r3"}) {
		t.Fatalf("got %v", got)
	}
	// The history survives, with the redrive recorded, and dedup points to the new seq.
	wantNoErr(t, h.reject(d.Receipt, "again"))
	dead, _ := h.f.ListDead(DeadFilter{})
	if len(dead) != 1 || dead[0].FirstEnqueuedAt != t0 || len(dead[0].History) != 3 || dead[0].History[1].Kind != EventRedriven {
		t.Fatalf("dead after second reject %+v", dead)
	}
	if out := h.sendMsgs(NewMessage{ID: "r1"}); !out[0].Duplicate || out[0].Seq != d.Receipt.Seq {
		t.Fatalf("dedup after redrive %+v", out)
	}
}

func TestFSM_DeleteDeadDiscardsSelected(t *testing.T) {
	h := deadSetup(t)
	r := h.apply(Command{Type: CmdDeleteDead, DeleteDead: &DeadFilter{Reason: DeadRejected}})
	if r.Count != 3 || h.stats().Dead != 2 || h.stats().Counters.DeadDeleted != 3 || h.store.Live() != 2 {
		t.Fatalf("count %d stats %+v live %d", r.Count, h.stats(), h.store.Live())
	}
	r = h.apply(Command{Type: CmdDeleteDead, DeleteDead: &DeadFilter{Limit: -1}})
	wantErrIs(t, r.Err, ErrInvalidArgument)
}

func TestFSM_PurgeDeletesReadyAndDelayedButNotLeased(t *testing.T) {
	h := newHarness(t)
	h.send("leased", "g", "x")
	h.send("waiting", "g", "x")
	h.sendMsgs(NewMessage{ID: "delayed", Delay: time.Hour})
	h.send("ready", "", "x")
	d := h.receiveOne("c")
	r := h.apply(Command{Type: CmdPurge})
	if r.Count != 3 {
		t.Fatalf("purged %d", r.Count)
	}
	h.expectNothing()
	st := h.stats()
	if st.InFlight != 1 || st.Ready+st.Delayed != 0 || st.Counters.Purged != 3 || h.store.Live() != 1 {
		t.Fatalf("stats %+v", st)
	}
	wantNoErr(t, h.ack(d.Receipt))
	h.send("after", "g", "x")
	if got := h.receiveOne("c"); got.ID != "after" {
		t.Fatalf("got %s", got.ID)
	}
}

func TestFSM_RetentionDeletesOldMessagesButNotLeasedOrDead(t *testing.T) {
	h := newHarness(t, func(c *QueueConfig) { c.Retention, c.MaxReceives, c.DedupWindow = time.Hour, 1, 2*time.Hour })
	h.send("old-leased", "", "x")
	h.send("old-dead", "", "x")
	h.send("old", "", "x")
	d := h.receive("c", 1, 2*time.Hour)[0]
	wantNoErr(t, h.reject(h.receiveOne("c").Receipt, "bad"))
	h.advance(30 * time.Minute)
	h.send("young", "", "x")
	if dl, ok := h.f.NextDeadline(); !ok || dl != t0+int64(time.Hour) {
		t.Fatalf("deadline %d", dl)
	}
	h.advance(30 * time.Minute)
	h.tick()
	st := h.stats()
	if st.Counters.RetentionExpired != 1 || st.InFlight != 1 || st.Ready != 1 || st.Dead != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The leased one goes when its lease ends (and it is then dead-lettered
	// by MaxReceives=1 rather than expired: leases count first).
	h.advance(time.Hour)
	h.tick()
	if st := h.stats(); st.Counters.RetentionExpired != 2 || st.Dead != 2 {
		t.Fatalf("stats %+v", st)
	}
	_ = d
}

func TestFSM_SetConfigValidatesAndApplies(t *testing.T) {
	h := newHarness(t)
	bad := DefaultQueueConfig()
	bad.BackoffMax = bad.BackoffBase - 1
	r := h.apply(Command{Type: CmdSetConfig, SetConfig: &bad})
	wantErrIs(t, r.Err, ErrInvalidConfig)
	if h.f.Config() != DefaultQueueConfig() {
		t.Fatal("invalid config applied")
	}
	good := DefaultQueueConfig()
	good.VisibilityTimeout = time.Second
	wantNoErr(t, h.apply(Command{Type: CmdSetConfig, SetConfig: &good}).Err)
	h.send("a", "", "x")
	if d := h.receiveOne("c"); d.Deadline != h.now+int64(time.Second) {
		t.Fatalf("deadline %d", d.Deadline)
	}
}

func TestFSM_ConfigValidateNamesTheField(t *testing.T) {
	cases := map[string]func(*QueueConfig){
		"VisibilityTimeout": func(c *QueueConfig) { c.VisibilityTimeout = VisibilityTimeoutMax + 1 },
		"MaxReceives":       func(c *QueueConfig) { c.MaxReceives = -1 },
		"BackoffBase":       func(c *QueueConfig) { c.BackoffBase = -1 },
		"BackoffMax":        func(c *QueueConfig) { c.BackoffMax = BackoffMaxLimit + 1 },
		"DedupWindow":       func(c *QueueConfig) { c.DedupWindow = DedupWindowMax + 1 },
		"MaxMessageBytes":   func(c *QueueConfig) { c.MaxMessageBytes = 0 },
		"MaxDepth":          func(c *QueueConfig) { c.MaxDepth = -1 },
		"MaxBytes":          func(c *QueueConfig) { c.MaxBytes = -1 },
		"Retention":         func(c *QueueConfig) { c.Retention = -1 },
	}
	for field, mutate := range cases {
		c := DefaultQueueConfig()
		mutate(&c)
		err := c.Validate()
		wantErrIs(t, err, ErrInvalidConfig)
		if !strings.Contains(err.Error(), "QueueConfig."+field) {
			t.Errorf("%s: error %q does not name the field", field, err)
		}
	}
	if err := DefaultQueueConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	if _, err := New(QueueConfig{}, NewMemBodyStore()); err == nil {
		t.Fatal("New accepted a zero config")
	}
}

// A delete or redrive that names sequence numbers touches only those the
// other fields of the filter select too.
func TestFSM_DeadBySeqsHonoursEveryField(t *testing.T) {
	h := deadSetup(t)
	r := h.apply(Command{Type: CmdDeleteDead, DeleteDead: &DeadFilter{Seqs: []uint64{1, 2, 3, 4, 5}, Reason: DeadRejected, Group: "g", Text: "r2"}})
	if r.Err != nil || r.Count != 1 {
		t.Fatalf("delete: count %d, err %v", r.Count, r.Err)
	}
	left, err := h.f.ListDead(DeadFilter{})
	wantNoErr(t, err)
	if got := deadIDs(left); !slices.Equal(got, []string{"r1", "r3", "x1", "x2"}) {
		t.Fatalf("left after delete: %v", got)
	}
	r = h.apply(Command{Type: CmdRedrive, Redrive: &DeadFilter{Seqs: []uint64{1, 3, 4}, Reason: DeadLeaseExpired}})
	if r.Err != nil || r.Count != 1 {
		t.Fatalf("redrive: count %d, err %v", r.Count, r.Err)
	}
	left, err = h.f.ListDead(DeadFilter{})
	wantNoErr(t, err)
	if got := deadIDs(left); !slices.Equal(got, []string{"r1", "r3", "x2"}) {
		t.Fatalf("left after redrive: %v", got)
	}
}

// TestFSM_PeekDeadStopsAtItsByteBudget checks that a dead-letter peek
// holds at most its byte budget of letters (the first one always), says
// when the budget ended the page, and resumes after the last one.
func TestFSM_PeekDeadStopsAtItsByteBudget(t *testing.T) {
	h := deadSetup(t)
	all, more, err := h.f.PeekDead(DeadFilter{}, 0)
	wantNoErr(t, err)
	if len(all) < 3 || more {
		t.Fatalf("unbounded peek: %d letters, more %v", len(all), more)
	}
	budget := all[0].Bytes + all[1].Bytes
	page, more, err := h.f.PeekDead(DeadFilter{}, budget)
	wantNoErr(t, err)
	if len(page) != 2 || !more || page[1].Seq != all[1].Seq {
		t.Fatalf("peek within %d bytes: %d letters, more %v", budget, len(page), more)
	}
	var got []string
	for f := (DeadFilter{}); ; {
		page, more, err := h.f.PeekDead(f, budget)
		wantNoErr(t, err)
		got = append(got, deadIDs(page)...)
		if !more {
			break
		}
		f.AfterSeq = page[len(page)-1].Seq
	}
	if !slices.Equal(got, deadIDs(all)) {
		t.Fatalf("paged by bytes: %v, want %v", got, deadIDs(all))
	}
	one, more, err := h.f.PeekDead(DeadFilter{}, 1)
	wantNoErr(t, err)
	if len(one) != 1 || !more || string(one[0].Body) != string(all[0].Body) {
		t.Fatalf("a budget below one letter: %d letters, more %v; want the first alone", len(one), more)
	}
	_, _, err = h.f.PeekDead(DeadFilter{}, -1)
	wantErrIs(t, err, ErrInvalidArgument)
}
