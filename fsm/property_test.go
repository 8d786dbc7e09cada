package fsm

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ferrymq/ferry/wal"
	"pgregory.net/rapid"
)

// genConfig draws a small-scale queue config so that limits, retries, dedup
// expiry and retention all happen within a short random run.
func genConfig(t *rapid.T) QueueConfig {
	base := rapid.SampledFrom([]time.Duration{0, 500 * time.Millisecond, time.Second}).Draw(t, "backoffBase")
	return QueueConfig{
		VisibilityTimeout: rapid.SampledFrom([]time.Duration{time.Second, 2 * time.Second, 5 * time.Second}).Draw(t, "visibility"),
		MaxReceives:       rapid.IntRange(0, 3).Draw(t, "maxReceives"),
		BackoffBase:       base,
		BackoffMax:        base * time.Duration(rapid.SampledFrom([]int{1, 4, 10}).Draw(t, "backoffFactor")),
		DedupWindow:       rapid.SampledFrom([]time.Duration{0, 3 * time.Second, 30 * time.Second}).Draw(t, "dedup"),
		MaxMessageBytes:   40,
		MaxDepth:          rapid.SampledFrom([]int64{0, 0, 4}).Draw(t, "maxDepth"),
		MaxBytes:          rapid.SampledFrom([]int64{0, 0, 120}).Draw(t, "maxBytes"),
		Retention:         rapid.SampledFrom([]time.Duration{0, 0, 15 * time.Second}).Draw(t, "retention"),
		MaxDead:           rapid.SampledFrom([]int64{0, 0, 2}).Draw(t, "maxDead"),
		MaxDeadBytes:      rapid.SampledFrom([]int64{0, 0, 60}).Draw(t, "maxDeadBytes"),
		DeadRetention:     rapid.SampledFrom([]time.Duration{0, 0, 10 * time.Second}).Draw(t, "deadRetention"),
		DedupMaxIDs:       rapid.SampledFrom([]int64{0, 0, 3}).Draw(t, "dedupMaxIDs"),
		MaxInFlight:       rapid.SampledFrom([]int64{0, 0, 1, 2}).Draw(t, "maxInFlight"),
		MaxDeliveryRate:   rapid.SampledFrom([]int64{0, 0, 1, 3}).Draw(t, "maxDeliveryRate"),
		FairGroups:        rapid.SampledFrom([]int64{0, 1}).Draw(t, "fairGroups"),
	}
}

// genReceipt draws a receipt: usually one handed out before (possibly
// stale), sometimes a made-up one.
func genReceipt(t *rapid.T, handed []Receipt) Receipt {
	if len(handed) > 0 && rapid.IntRange(0, 9).Draw(t, "realReceipt") > 0 {
		return rapid.SampledFrom(handed).Draw(t, "receipt")
	}
	return Receipt{Seq: rapid.Uint64Range(0, 12).Draw(t, "seq"), Attempt: rapid.Uint32Range(0, 3).Draw(t, "attempt")}
}

// genID names message i: a short id, an id in the client's ULID layout
// (which the FSM holds packed) or one that only looks like it.
func genID(i int) string {
	switch i % 3 {
	case 1:
		return fmt.Sprintf("01HZX3Q9V8K2M4N6P7R9S1T3%02d", i)
	case 2:
		return fmt.Sprintf("01hzx3q9v8k2m4n6p7r9s1t3%02d", i)
	}
	return fmt.Sprintf("m%d", i)
}

func genMessage(t *rapid.T) NewMessage {
	nm := NewMessage{
		ID:    genID(rapid.IntRange(0, 14).Draw(t, "id")),
		Group: rapid.SampledFrom([]string{"", "", "g1", "g2"}).Draw(t, "group"),
		Body:  rapid.SliceOfN(rapid.Byte(), 0, 45).Draw(t, "body"),
		Delay: rapid.SampledFrom([]time.Duration{0, 0, 0, time.Second, 4 * time.Second, -1}).Draw(t, "delay"),
	}
	if rapid.IntRange(0, 5).Draw(t, "withHeaders") == 0 {
		nm.Headers = map[string]string{"k": rapid.StringN(0, 4, 4).Draw(t, "hv")}
	}
	if rapid.IntRange(0, 20).Draw(t, "badID") == 0 {
		nm.ID = ""
	}
	// Mostly the default, often a few levels, now and then out of range.
	nm.Priority = rapid.SampledFrom([]uint8{0, 0, 0, 1, 5, 9, 9, 10}).Draw(t, "priority")
	return nm
}

func genFilter(t *rapid.T) *DeadFilter {
	f := &DeadFilter{
		Reason: DeadReason(rapid.IntRange(0, 3).Draw(t, "reason")),
		Group:  rapid.SampledFrom([]string{"", "", "g1"}).Draw(t, "fgroup"),
		Limit:  rapid.IntRange(0, 2).Draw(t, "limit"),
		Text:   rapid.SampledFrom([]string{"", "", "", "r", "bad", "expired", "limit"}).Draw(t, "ftext"),
	}
	if rapid.IntRange(0, 2).Draw(t, "withSeqs") == 0 {
		f.Seqs = rapid.SliceOfN(rapid.Uint64Range(1, 12), 1, 4).Draw(t, "fseqs")
	}
	return f
}

// genCommand draws one command of any type (without its time).
func genCommand(t *rapid.T, handed []Receipt) Command {
	switch rapid.IntRange(0, 31).Draw(t, "op") {
	case 29, 30, 31:
		return genScheduleCommand(t)
	case 0, 1, 2, 3:
		n := rapid.IntRange(1, 3).Draw(t, "n")
		msgs := make([]NewMessage, n)
		for i := range msgs {
			msgs[i] = genMessage(t)
		}
		return Command{Type: CmdSend, Send: &SendCmd{Messages: msgs}}
	case 4, 5, 6:
		return Command{Type: CmdReceive, Receive: &ReceiveCmd{
			Consumer:   rapid.SampledFrom([]string{"c1", "c2"}).Draw(t, "consumer"),
			Max:        rapid.IntRange(1, 3).Draw(t, "max"),
			Visibility: rapid.SampledFrom([]time.Duration{0, time.Second, 3 * time.Second}).Draw(t, "vis"),
		}}
	case 7, 8:
		return Command{Type: CmdAck, Ack: &AckCmd{Receipts: []Receipt{genReceipt(t, handed)}}}
	case 9:
		vis := rapid.SampledFrom([]time.Duration{0, time.Second, 4 * time.Second}).Draw(t, "extendVis")
		return Command{Type: CmdExtend, Extend: &ExtendCmd{Items: []ExtendItem{{Receipt: genReceipt(t, handed), Visibility: vis}}}}
	case 10, 11:
		it := NackItem{Receipt: genReceipt(t, handed), ExplicitDelay: rapid.Bool().Draw(t, "explicit"),
			Delay: rapid.SampledFrom([]time.Duration{0, time.Second, -1}).Draw(t, "nackDelay"), Reason: "r",
			Release: rapid.IntRange(0, 3).Draw(t, "release") == 0}
		return Command{Type: CmdNack, Nack: &NackCmd{Items: []NackItem{it}}}
	case 12:
		return Command{Type: CmdReject, Reject: &RejectCmd{Items: []RejectItem{{Receipt: genReceipt(t, handed), Reason: "bad"}}}}
	case 13, 14, 15:
		return Command{Type: CmdTick}
	case 16:
		return Command{Type: CmdRedrive, Redrive: genFilter(t)}
	case 17:
		return Command{Type: CmdDeleteDead, DeleteDead: genFilter(t)}
	case 18:
		return Command{Type: CmdPurge}
	case 20, 21:
		n := rapid.IntRange(0, 2).Draw(t, "acks")
		var rs []Receipt
		for range n {
			rs = append(rs, genReceipt(t, handed))
		}
		return Command{Type: CmdReceiveAck, ReceiveAck: &ReceiveAckCmd{Receipts: rs, Receive: ReceiveCmd{
			Consumer:   rapid.SampledFrom([]string{"c1", "c2"}).Draw(t, "raConsumer"),
			Max:        rapid.IntRange(1, 3).Draw(t, "raMax"),
			Visibility: rapid.SampledFrom([]time.Duration{0, time.Second, 3 * time.Second}).Draw(t, "raVis"),
		}}}
	case 24, 25:
		return Command{Type: CmdDeleteMessage, Delete: &DeleteMessageCmd{Seq: rapid.Uint64Range(0, 12).Draw(t, "delSeq"),
			ID: genID(rapid.IntRange(0, 14).Draw(t, "delID")), Undelivered: rapid.Bool().Draw(t, "undelivered")}}
	case 26:
		return Command{Type: CmdPurgeAll}
	case 27, 28:
		return Command{Type: CmdDeleteMessages, DeleteMany: genDeleteMessages(t)}
	case 22, 23:
		return Command{Type: CmdPause, Pause: &PauseCmd{Paused: rapid.IntRange(0, 2).Draw(t, "pause") > 0,
			By: rapid.SampledFrom([]string{"", "ops", "oncall"}).Draw(t, "pausedBy")}}
	default:
		cfg := genConfig(t)
		return Command{Type: CmdSetConfig, SetConfig: &cfg}
	}
}

// applyModel applies c to the model and returns the model's answer.
func applyModel(md *model, c Command) Result {
	expired := md.step(c.At)
	r := Result{Type: c.Type}
	if applyModelSchedule(md, c, &r) {
		return r
	}
	switch c.Type {
	case CmdSend:
		for _, nm := range c.Send.Messages {
			r.Sent = append(r.Sent, md.send(nm))
		}
	case CmdReceive:
		r.Delivered = md.receive(*c.Receive)
	case CmdAck:
		r.Settled = []error{md.ack(c.Ack.Receipts[0])}
	case CmdReceiveAck:
		for _, rc := range c.ReceiveAck.Receipts {
			r.Settled = append(r.Settled, md.ack(rc))
		}
		r.Delivered = md.receive(c.ReceiveAck.Receive)
	case CmdExtend:
		r.Settled = []error{md.extend(c.Extend.Items[0])}
	case CmdNack:
		r.Settled = []error{md.nack(c.Nack.Items[0])}
	case CmdReject:
		r.Settled = []error{md.reject(c.Reject.Items[0])}
	case CmdTick:
		r.Count = expired
	case CmdRedrive:
		r.Count = md.redrive(*c.Redrive)
	case CmdDeleteDead:
		r.Count = md.deleteDead(*c.DeleteDead)
	case CmdPurge:
		r.Count = md.purge()
	case CmdPurgeAll:
		r.Count = md.purgeAll()
	case CmdDeleteMessages:
		r.Count, r.Err = md.deleteMessages(*c.DeleteMany)
	case CmdSetConfig:
		md.cfg = *c.SetConfig
		md.trimDead()
	case CmdDeleteMessage:
		r.Err = md.deleteMessage(*c.Delete)
		if r.Err == nil {
			r.Count = 1
		}
	case CmdPause:
		if !c.Pause.Paused {
			md.pause = PauseState{}
		} else if !md.pause.Paused {
			md.pause = PauseState{Paused: true, By: c.Pause.By, At: md.clock}
		}
	}
	return r
}

func compareResults(t *rapid.T, got, want Result) {
	if errKind(got.Err) != errKind(want.Err) || got.Count != want.Count || len(got.Sent) != len(want.Sent) ||
		len(got.Settled) != len(want.Settled) || len(got.Delivered) != len(want.Delivered) {
		t.Fatalf("%s: fsm %+v, model %+v", got.Type, got, want)
	}
	for i := range got.Sent {
		g, w := got.Sent[i], want.Sent[i]
		if g.Seq != w.Seq || g.Duplicate != w.Duplicate || errKind(g.Err) != errKind(w.Err) {
			t.Fatalf("send %d: fsm %+v, model %+v", i, g, w)
		}
	}
	for i := range got.Settled {
		if errKind(got.Settled[i]) != errKind(want.Settled[i]) {
			t.Fatalf("%s item %d: fsm %v, model %v", got.Type, i, got.Settled[i], want.Settled[i])
		}
	}
	for i := range got.Delivered {
		g, w := got.Delivered[i], want.Delivered[i]
		if len(g.Body) == 0 && len(w.Body) == 0 {
			g.Body, w.Body = nil, nil
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("delivery %d: fsm %+v, model %+v", i, g, w)
		}
	}
}

// listing is the per-message state both sides must agree on.
type listing struct {
	seq       uint64
	priority  uint8
	id, group string
	state     msgState
	attempts  uint32
	visibleAt int64 // for delayed and in-flight messages
	reason    DeadReason
	deadAt    int64
	history   int
}

func fsmListing(f *FSM) []listing {
	var out []listing
	f.eachMessage(func(m *message) {
		l := listing{seq: m.seq, priority: m.priority(), id: m.id(), state: m.state, attempts: m.attempts}
		if m.group != nil {
			l.group = m.group.name
		}
		if m.state == stateDelayed || m.state == stateInFlight {
			l.visibleAt = m.visibleAt
		}
		if m.info != nil {
			l.reason, l.deadAt, l.history = m.info.deadReason, m.info.deadAt, len(m.info.history)
		}
		out = append(out, l)
	})
	return out
}

func modelListing(md *model) []listing {
	var out []listing
	for _, m := range md.msgs {
		if m.state == 0 {
			continue
		}
		l := listing{seq: m.seq, priority: m.priority, id: m.id, group: m.group, state: m.state, attempts: m.attempts,
			reason: m.reason, history: min(m.history, HistoryMax)}
		if m.state == stateDead {
			l.deadAt = m.deadAt
		}
		if m.state == stateDelayed || m.state == stateInFlight {
			l.visibleAt = m.visibleAt
		}
		out = append(out, l)
	}
	return out
}

// checkModelRules checks the delivery rules on the model's state; the FSM's
// state equals it, so they hold for the FSM too.
func checkModelRules(t *rapid.T, md *model) {
	leasedPerGroup := map[string]int{}
	for _, m := range md.msgs {
		if m.state == stateInFlight && m.group != "" {
			leasedPerGroup[m.group]++
			if md.groupHead(m.group) != m {
				t.Fatalf("seq %d leased while an earlier message of group %s is unfinished", m.seq, m.group)
			}
		}
		if m.state == stateReady && m.visibleAt > md.clock {
			t.Fatalf("seq %d ready before its time", m.seq)
		}
	}
	for g, n := range leasedPerGroup {
		if n > 1 {
			t.Fatalf("group %s has %d leased messages", g, n)
		}
	}
}

func modelStats(md *model) (ready, eligible, delayed, inFlight, dead, bytes int64) {
	for _, m := range md.msgs {
		switch m.state {
		case stateReady:
			ready++
			if md.eligible(m) {
				eligible++
			}
		case stateDelayed:
			delayed++
		case stateInFlight:
			inFlight++
		case stateDead:
			dead++
		}
		if md.live(m) {
			bytes += md.stored(m)
		}
	}
	return
}

func compareState(t *rapid.T, f *FSM, md *model) {
	if err := f.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if got, want := fsmListing(f), modelListing(md); !slices.Equal(got, want) {
		t.Fatalf("state differs:\nfsm   %+v\nmodel %+v", got, want)
	}
	if int(f.guard) != md.guard {
		t.Fatalf("starvation guard: fsm %d, model %d", f.guard, md.guard)
	}
	if f.laneClock != md.laneClock || f.plainTick != md.plainTick {
		t.Fatalf("lane clock and ungrouped stamp: fsm %d %d, model %d %d", f.laneClock, f.plainTick, md.laneClock, md.plainTick)
	}
	for name, g := range f.groups {
		if g.served != md.served[name] {
			t.Fatalf("group %s stamped %d, model %d", name, g.served, md.served[name])
		}
	}
	st := f.Stats()
	r, e, d, i, dd, b := modelStats(md)
	if st.Ready != r || st.Eligible != e || st.Delayed != d || st.InFlight != i || st.Dead != dd || st.Bytes != b ||
		st.Counters != md.counters || st.LastSeq != md.lastSeq || st.Clock != md.clock || st.Pause != md.pause {
		t.Fatalf("stats %+v; model ready %d eligible %d delayed %d inflight %d dead %d bytes %d counters %+v",
			st, r, e, d, i, dd, b, md.counters)
	}
}

// TestFSM_PropertyMatchesModel runs random command sequences with random
// clocks through the FSM and the reference model; after every step both
// must give the same answers and hold the same state.
func TestFSM_PropertyMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := genConfig(rt)
		f, err := New(cfg, NewMemBodyStore())
		if err != nil {
			rt.Fatal(err)
		}
		md := &model{cfg: cfg}
		now := t0
		var handed []Receipt
		var rated rateCheck
		groupLast := map[string]uint64{} // the last seq delivered per group
		ticks := map[string]bool{}       // ids of schedule ticks sent
		steps := rapid.IntRange(1, 150).Draw(rt, "steps")
		for range steps {
			now += int64(rapid.SampledFrom([]time.Duration{0, 0, 100 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second, -2 * time.Second}).Draw(rt, "dt"))
			c := genCommand(rt, handed)
			c.At = now
			if c.Type == CmdDeleteMessage {
				// Most deletes name a message that exists, by its id.
				if m := md.find(c.Delete.Seq); m != nil && rapid.IntRange(0, 3).Draw(rt, "realID") > 0 {
					c.Delete.ID = m.id
				}
			}
			if c.Type == CmdDeleteMessages {
				realIDs(rt, md, c.DeleteMany)
			}
			if c.Type == CmdFireSchedule {
				next := int64(0)
				if s := md.schedules[c.Fire.Name]; s != nil {
					next = s.next
				}
				aimFire(rt, &c, next)
			}
			var before [32]byte
			settleOnly := c.Type == CmdAck || c.Type == CmdExtend || c.Type == CmdNack || c.Type == CmdReject
			if settleOnly {
				f.ApplyCommand(Command{Type: CmdTick, At: now})
				applyModel(md, Command{Type: CmdTick, At: now})
				before = f.Digest()
			}
			paused := f.Pause().Paused
			leasedBefore := f.Stats().Counters.Leased
			got := f.ApplyCommand(c)
			want := applyModel(md, c)
			if paused && (len(got.Delivered) > 0 || f.Stats().Counters.Leased != leasedBefore) {
				rt.Fatalf("%s leased %d messages while paused", c.Type, len(got.Delivered))
			}
			if limit := f.Config().MaxInFlight; limit > 0 && len(got.Delivered) > 0 && f.Stats().InFlight > limit {
				rt.Fatalf("%s leased %d messages past max_in_flight %d: %d in flight", c.Type, len(got.Delivered), limit, f.Stats().InFlight)
			}
			if len(got.Delivered) > 0 {
				rated.leased(rt, f.Config().MaxDeliveryRate, f.Stats().Clock, len(got.Delivered))
			}
			compareResults(rt, got, want)
			if settleOnly && len(got.Settled) == 1 && got.Settled[0] != nil && f.Digest() != before {
				rt.Fatalf("a refused %s changed the state", c.Type)
			}
			for _, d := range got.Delivered {
				handed = append(handed, d.Receipt)
				if d.Group != "" {
					// Priorities never reorder a group: its deliveries
					// go in seq order (a retry repeats a seq).
					if d.Receipt.Seq < groupLast[d.Group] {
						rt.Fatalf("group %s: seq %d delivered after seq %d", d.Group, d.Receipt.Seq, groupLast[d.Group])
					}
					groupLast[d.Group] = d.Receipt.Seq
				}
				if cfg := f.Config(); cfg.MaxReceives > 0 && int(d.Receipt.Attempt) > cfg.MaxReceives {
					rt.Fatalf("delivery attempt %d beyond MaxReceives %d", d.Receipt.Attempt, cfg.MaxReceives)
				}
			}
			compareState(rt, f, md)
			compareSchedules(rt, f, md)
			checkModelRules(rt, md)
			comparePeek(rt, f, md)
			for _, o := range got.Sent {
				if c.Type == CmdFireSchedule && o.Err == nil && !o.Duplicate {
					id := ScheduleMessageID(c.Fire.Name, c.Fire.Tick)
					if ticks[id] {
						rt.Fatalf("tick %s sent twice", id)
					}
					ticks[id] = true
				}
			}
		}
	})
}

// TestFSM_PropertyDeterministicAndSnapshotTransparent feeds the same random
// commands to an FSM on the in-memory store and one on a real WAL; at a
// random point a third FSM is restored from a snapshot of the first. All
// three must end with the same digest.
func TestFSM_PropertyDeterministicAndSnapshotTransparent(t *testing.T) {
	root := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		cfg := genConfig(rt)
		a, _ := New(cfg, NewMemBodyStore())
		b, _ := New(cfg, WALBodyStore{openTestWAL(rt, fmt.Sprintf("%s/b%d", root, run))})
		var c *FSM
		steps := rapid.IntRange(1, 50).Draw(rt, "steps")
		snapAt := rapid.IntRange(0, steps).Draw(rt, "snapAt")
		now := t0
		var handed []Receipt
		for i := range steps {
			if i == snapAt {
				c = restoredCopy(rt, a, cfg, fmt.Sprintf("%s/c%d", root, run))
			}
			now += int64(rapid.SampledFrom([]time.Duration{0, time.Second, 5 * time.Second}).Draw(rt, "dt"))
			cmd := genCommand(rt, handed)
			cmd.At = now
			if cmd.Type == CmdFireSchedule {
				aimFire(rt, &cmd, fsmNext(a, cmd.Fire.Name))
			}
			data, err := EncodeCommand(cmd)
			if err != nil {
				rt.Fatal(err)
			}
			ra := a.Apply(data)
			b.Apply(data)
			if c != nil {
				c.Apply(data)
			}
			for _, d := range ra.Delivered {
				handed = append(handed, d.Receipt)
			}
		}
		if c == nil {
			c = restoredCopy(rt, a, cfg, fmt.Sprintf("%s/c%d", root, run))
		}
		da, db, dc := a.Digest(), b.Digest(), c.Digest()
		if da != db || da != dc {
			rt.Fatalf("digests differ: mem %x wal %x restored %x", da[:6], db[:6], dc[:6])
		}
		if !slices.Equal(fsmListing(a), fsmListing(c)) {
			rt.Fatal("restored listing differs")
		}
	})
}

func openTestWAL(t *rapid.T, dir string) *wal.Log {
	cfg := wal.DefaultConfig(dir)
	cfg.SegmentBytesMax = 1 << 20
	cfg.RecordBytesMax = 1024
	l, _, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); os.RemoveAll(dir) })
	return l
}

// restoredCopy snapshots f, persists it, and restores it into a new FSM on
// a real WAL.
func restoredCopy(t *rapid.T, f *FSM, cfg QueueConfig, dir string) *FSM {
	snap := f.Snapshot()
	var buf bytes.Buffer
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	c, _ := New(cfg, WALBodyStore{openTestWAL(t, dir)})
	if err := c.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if err := c.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	return c
}

// rateCheck checks the delivery rate bound from the outside: with a rate
// of r per second in force, the deliveries within any window of one
// second number at most 2r (a second's burst plus a second's rate). Its
// window restarts whenever the rate changes.
type rateCheck struct {
	rate  int64
	times []int64 // one entry per delivery under rate
}

func (c *rateCheck) leased(t *rapid.T, rate, at int64, n int) {
	if rate != c.rate {
		c.rate, c.times = rate, nil
	}
	if rate == 0 {
		return
	}
	for range n {
		c.times = append(c.times, at)
	}
	inWindow := 0
	for _, x := range c.times {
		if x > at-int64(time.Second) {
			inWindow++
		}
	}
	if int64(inWindow) > 2*rate {
		t.Fatalf("%d deliveries within a second at a rate of %d/s", inWindow, rate)
	}
}
