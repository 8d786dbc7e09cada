package chaos

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
)

// hist builds hand-made histories; times are milliseconds after t0.
type hist struct {
	h     History
	final Final
}

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func newHist() *hist {
	return &hist{final: Final{
		Drained: true, DeadListed: true, MaxReceives: map[string]int{"q": 3},
		Convergence: []Convergence{{Group: "q-0", Queue: "q", Agreed: true}},
	}}
}

// send records a message of producer p with one attempt of the given
// outcome over [at, at+5].
func (b *hist) send(id, group string, index int, out Outcome, at int) *hist {
	return b.sendBy("p1", id, group, index, out, at)
}

func (b *hist) sendBy(p, id, group string, index int, out Outcome, at int) *hist {
	s := &Send{ID: id, Queue: "q", Group: group, GroupIndex: index, Producer: p}
	s.Attempts = []SendAttempt{{Start: ms(at), End: ms(at + 5), Outcome: out, Seq: uint64(len(b.h.Sends) + 1)}}
	b.h.Sends = append(b.h.Sends, s)
	return b
}

// deliver records a delivery of id whose receive ran over [from, to],
// leased at from with a deadline 1500 later. It returns the delivery's
// number.
func (b *hist) deliver(id string, attempt uint32, from, to int, act Action) int {
	group := ""
	for _, s := range b.h.Sends {
		if s.ID == id {
			group = s.Group
		}
	}
	n := len(b.h.Deliveries)
	b.h.Deliveries = append(b.h.Deliveries, Delivery{N: n, ID: id, Queue: "q", Group: group, Attempt: attempt,
		Consumer: "c1", RecvStart: ms(from), RecvEnd: ms(to), LeasedAt: ms(from), Deadline: ms(from + 1500), Action: act})
	return n
}

func (b *hist) settle(n int, kind SettleKind, out Outcome, start, end int) {
	b.h.Settles = append(b.h.Settles, Settle{Delivery: n, Kind: kind, Outcome: out, Start: ms(start), End: ms(end),
		LeaseLost: out == Failed})
}

func (b *hist) dead(id string, code client.DeadReason, attempts uint32, at int) {
	b.final.DeadLetters = append(b.final.DeadLetters, DeadLetter{Queue: "q", ID: id, Code: code, Reason: code.String(),
		Attempts: attempts, DeadAt: ms(at)})
}

func (b *hist) check(t *testing.T, want map[string]int) *Report {
	t.Helper()
	rep := Check(b.h, b.final)
	for _, k := range ViolationKinds {
		if rep.ViolationCounts[k] != want[k] {
			var sb strings.Builder
			rep.Summary(&sb)
			t.Fatalf("%s violations: got %d, want %d\n%s", k, rep.ViolationCounts[k], want[k], sb.String())
		}
	}
	return rep
}

func TestCheck_CleanHistoryPasses(t *testing.T) {
	b := newHist()
	b.send("a", "g", 0, OK, 0).send("b", "g", 1, OK, 10).send("c", "", -1, OK, 20)
	b.send("d", "", -1, Unknown, 30).send("e", "", -1, Unknown, 40).send("f", "", -1, Failed, 50)
	b.send("x", "", -1, OK, 55)
	// a: nacked once, then acked; b waits for a's ack.
	b.settle(b.deliver("a", 1, 100, 110, ActNack), SettleNack, OK, 120, 130)
	b.settle(b.deliver("a", 2, 300, 310, ActAck), SettleAck, OK, 320, 330)
	b.settle(b.deliver("b", 1, 310, 335, ActReject), SettleReject, OK, 340, 350)
	b.dead("b", client.DeadRejected, 1, 345)
	// c: abandoned, then used up its receives (last lease expired).
	b.deliver("c", 1, 100, 110, ActAbandon)
	b.settle(b.deliver("c", 2, 1700, 1710, ActSlow), SettleAck, Failed, 3300, 3310)
	b.deliver("c", 3, 3400, 3410, ActAbandon)
	b.dead("c", client.DeadLeaseExpired, 3, 4910)
	// d: unknown send that was stored after all; its ack's outcome is
	// unknown, and nothing shows it again: it was acked.
	b.settle(b.deliver("d", 1, 100, 110, ActAck), SettleAck, Unknown, 120, 4120)
	// x: acked late, after its lease expired but before anyone else got it.
	b.settle(b.deliver("x", 1, 100, 110, ActSlow), SettleAck, OK, 1800, 1810)
	rep := b.check(t, nil)
	if rep.Counts.Confirmed != 4 || rep.Counts.Unknown != 2 || rep.Counts.Failed != 1 {
		t.Errorf("counts %+v", rep.Counts)
	}
	wantDup := map[string]int{CauseNack: 1, CauseAbandon: 1, CauseSlow: 1}
	if !reflect.DeepEqual(rep.Duplicates, wantDup) {
		t.Errorf("duplicates %v, want %v", rep.Duplicates, wantDup)
	}
	if rep.UnknownSends != (UnknownSends{Delivered: 1, NeverSeen: 1}) {
		t.Errorf("unknown sends %+v", rep.UnknownSends)
	}
}

func TestCheck_Lost(t *testing.T) {
	b := newHist()
	b.send("never-delivered", "", -1, OK, 0)
	b.send("ack-failed", "", -1, OK, 0)
	b.settle(b.deliver("ack-failed", 1, 10, 20, ActAck), SettleAck, Failed, 30, 40)
	b.send("ack-unknown", "", -1, OK, 0)
	b.settle(b.deliver("ack-unknown", 1, 10, 20, ActAck), SettleAck, Unknown, 30, 40)
	b.send("unknown-send", "", -1, Unknown, 0) // may not exist: never lost
	b.check(t, map[string]int{VLost: 2})
}

func TestCheck_IncompleteFinalStateFails(t *testing.T) {
	b := newHist()
	b.send("a", "", -1, OK, 0)
	b.final.Drained, b.final.Remaining = false, map[string]int64{"q": 1}
	b.final.DeadListed = false
	b.check(t, map[string]int{VIncomplete: 2}) // and lost is not judged
}

func TestCheck_Unexpected(t *testing.T) {
	b := newHist()
	b.send("failed", "", -1, Failed, 0)
	b.settle(b.deliver("failed", 1, 10, 20, ActAck), SettleAck, OK, 30, 40)
	b.settle(b.deliver("ghost", 1, 10, 20, ActAck), SettleAck, OK, 30, 40)
	b.dead("ghost2", client.DeadRejected, 1, 50)
	b.check(t, map[string]int{VUnexpected: 3})
}

// A delivery or dead letter with another priority than its message was
// sent with is flagged; the same priority (a redrive keeps it) is not.
func TestCheck_PriorityChanged(t *testing.T) {
	b := newHist()
	b.send("a", "", -1, OK, 0).send("b", "", -1, OK, 10).send("c", "", -1, OK, 20)
	b.h.Sends[0].Priority, b.h.Sends[1].Priority, b.h.Sends[2].Priority = 7, 3, 5
	n := b.deliver("a", 1, 100, 110, ActAck)
	b.h.Deliveries[n].Priority = 7
	b.settle(n, SettleAck, OK, 120, 130)
	n = b.deliver("b", 1, 100, 110, ActAck)
	b.h.Deliveries[n].Priority = 0
	b.settle(n, SettleAck, OK, 120, 130)
	b.settle(b.deliver("c", 1, 100, 110, ActReject), SettleReject, OK, 120, 130)
	b.h.Deliveries[len(b.h.Deliveries)-1].Priority = 5
	b.dead("c", client.DeadRejected, 1, 125)
	b.final.DeadLetters[0].Priority = 9
	rep := b.check(t, map[string]int{VPriority: 2})
	var details []string
	for _, v := range rep.Violations {
		details = append(details, v.ID+": "+v.Detail)
	}
	want := []string{"b: delivery with priority 0, sent with 3", "c: dead letter with priority 9, sent with 5"}
	if !reflect.DeepEqual(details, want) {
		t.Fatalf("violations %q, want %q", details, want)
	}
}

func TestCheck_GroupOrder(t *testing.T) {
	cases := []struct {
		name string
		ack  [2]int // a's ack call [start, end]
		want int
	}{
		{"b leased before a's ack started", [2]int{150, 160}, 1},
		{"b leased while a's ack was in flight", [2]int{90, 120}, 0},
		{"b leased after a's ack", [2]int{50, 60}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newHist()
			b.send("a", "g", 0, OK, 0).send("b", "g", 1, OK, 10)
			b.settle(b.deliver("a", 1, 20, 30, ActAck), SettleAck, OK, tc.ack[0], tc.ack[1])
			b.settle(b.deliver("b", 1, 95, 100, ActAck), SettleAck, OK, 200, 210)
			b.check(t, map[string]int{VGroupOrder: tc.want})
		})
	}
}

func TestCheck_GroupOrderFinishes(t *testing.T) {
	t.Run("earlier message dead-lettered by its last lease's expiry", func(t *testing.T) {
		b := newHist()
		b.send("a", "g", 0, OK, 0).send("b", "g", 1, OK, 10)
		b.deliver("a", 3, 20, 30, ActAbandon) // deadline 1520: expires, dead-lettered
		b.dead("a", client.DeadLeaseExpired, 3, 1600)
		b.settle(b.deliver("b", 1, 1500, 1540, ActAck), SettleAck, OK, 1550, 1560)
		b.check(t, nil)
	})
	t.Run("earlier message leased again when the later one was delivered", func(t *testing.T) {
		b := newHist()
		b.send("a", "g", 0, OK, 0).send("b", "g", 1, OK, 10)
		b.settle(b.deliver("a", 1, 20, 30, ActNack), SettleNack, OK, 40, 50)
		b.settle(b.deliver("b", 1, 60, 70, ActAck), SettleAck, OK, 80, 90)
		b.settle(b.deliver("a", 2, 100, 110, ActAck), SettleAck, OK, 120, 130)
		b.check(t, map[string]int{VGroupOrder: 1})
	})
	t.Run("earlier message never finished", func(t *testing.T) {
		b := newHist()
		b.send("a", "g", 0, OK, 0).send("b", "g", 1, OK, 10).send("c", "g", 2, OK, 20)
		b.settle(b.deliver("b", 1, 60, 70, ActAck), SettleAck, OK, 80, 90)
		b.settle(b.deliver("c", 1, 100, 110, ActAck), SettleAck, OK, 120, 130)
		b.check(t, map[string]int{VGroupOrder: 2, VLost: 1})
	})
	t.Run("an unknown send that was stored keeps its place", func(t *testing.T) {
		b := newHist()
		b.send("a", "g", 0, Unknown, 0).send("b", "g", 1, OK, 10)
		b.settle(b.deliver("b", 1, 60, 70, ActAck), SettleAck, OK, 80, 90)
		b.settle(b.deliver("a", 1, 100, 110, ActAck), SettleAck, OK, 120, 130)
		b.check(t, map[string]int{VGroupOrder: 1})
	})
	t.Run("two producers on one group", func(t *testing.T) {
		b := newHist()
		b.sendBy("p1", "a", "g", 0, OK, 0).sendBy("p2", "b", "g", 0, OK, 10)
		b.settle(b.deliver("a", 1, 20, 30, ActAck), SettleAck, OK, 40, 50)
		b.settle(b.deliver("b", 1, 60, 70, ActAck), SettleAck, OK, 80, 90)
		b.check(t, map[string]int{VGroupOrder: 1})
	})
}

func TestCheck_AckedRedelivered(t *testing.T) {
	b := newHist()
	b.send("a", "", -1, OK, 0).send("b", "", -1, OK, 0)
	// a: acked at 100, delivered again by a receive started at 150.
	b.settle(b.deliver("a", 1, 10, 20, ActAck), SettleAck, OK, 30, 100)
	b.settle(b.deliver("a", 2, 150, 160, ActAck), SettleAck, OK, 170, 180)
	// b: the second delivery was leased before the ack returned.
	b.settle(b.deliver("b", 1, 10, 20, ActAck), SettleAck, OK, 30, 100)
	b.settle(b.deliver("b", 2, 90, 160, ActAck), SettleAck, Failed, 170, 180)
	// c: an expired lease handed out late from a client's buffer: the
	// receive returned after the ack, the lease is older.
	b.send("c", "", -1, OK, 0)
	b.settle(b.deliver("c", 2, 30, 40, ActAck), SettleAck, OK, 50, 100)
	n := b.deliver("c", 1, 200, 200, ActAck)
	b.h.Deliveries[n].LeasedAt, b.h.Deliveries[n].Deadline = ms(10), ms(1510)
	b.settle(n, SettleAck, Failed, 210, 220)
	rep := b.check(t, map[string]int{VAckedRedelivered: 1})
	if rep.Duplicates[CauseAckRaced] != 2 {
		t.Errorf("duplicates %v", rep.Duplicates)
	}
}

func TestCheck_SpuriousDeadLetters(t *testing.T) {
	b := newHist()
	b.send("not-rejected", "", -1, OK, 0)
	b.settle(b.deliver("not-rejected", 1, 10, 20, ActNack), SettleNack, OK, 30, 40)
	b.dead("not-rejected", client.DeadRejected, 1, 35)
	b.send("early", "", -1, OK, 0)
	b.settle(b.deliver("early", 2, 10, 20, ActNack), SettleNack, OK, 30, 40)
	b.dead("early", client.DeadRetriesExhausted, 2, 35)
	b.send("acked", "", -1, OK, 0)
	b.settle(b.deliver("acked", 3, 10, 20, ActAck), SettleAck, OK, 30, 40)
	b.dead("acked", client.DeadLeaseExpired, 3, 1600)
	b.send("fine", "", -1, OK, 0)
	b.settle(b.deliver("fine", 3, 10, 20, ActNack), SettleNack, OK, 30, 40)
	b.dead("fine", client.DeadRetriesExhausted, 3, 35)
	b.check(t, map[string]int{VSpuriousDead: 3})
}

func TestCheck_Diverged(t *testing.T) {
	b := newHist()
	b.final.Convergence = append(b.final.Convergence, Convergence{Group: "q-1", Queue: "q", Partition: 1,
		Replicas: []string{"n1@10:aa", "n2@10:bb", "n3@9:aa"}})
	b.check(t, map[string]int{VDiverged: 1})
	b.final.Convergence = nil
	b.check(t, map[string]int{VDiverged: 1})
}

func TestCheck_DuplicateCauses(t *testing.T) {
	b := newHist()
	b.send("a", "", -1, OK, 0)
	steps := []struct {
		attempt uint32
		act     Action
		kind    SettleKind
		out     Outcome
	}{
		{1, ActNack, SettleNack, Unknown},
		{2, ActAck, SettleAck, Unknown},
		{3, ActAck, SettleAck, Failed}, // lease lost: the ack came too late
		{4, ActReject, SettleReject, Unknown},
		{5, ActAck, "", ""},
		{7, ActAck, "", ""}, // attempt 6 never reached us
		{7, ActAck, SettleAck, OK},
	}
	for i, s := range steps {
		n := b.deliver("a", s.attempt, 100*i, 100*i+10, s.act)
		if s.kind != "" {
			b.settle(n, s.kind, s.out, 100*i+20, 100*i+30)
		}
	}
	// b is rejected twice (after a failed reject), redriven by an
	// operator (a new seq, attempts from zero) and delivered again at
	// attempt 1: in attempt order alone, its attempt 1 would follow the
	// first incarnation's attempt 1.
	b.send("b", "", -1, OK, 0)
	b.settle(b.deliver("b", 1, 1000, 1010, ActReject), SettleReject, OK, 1020, 1030)
	b.h.Deliveries[len(b.h.Deliveries)-1].Seq = 4
	b.settle(b.deliver("b", 2, 1100, 1110, ActReject), SettleReject, OK, 1120, 1130)
	b.h.Deliveries[len(b.h.Deliveries)-1].Seq = 4
	redriven := b.deliver("b", 1, 2000, 2010, ActAck)
	b.h.Deliveries[redriven].Seq = 9
	b.settle(redriven, SettleAck, OK, 2020, 2030)
	b.final.MaxReceives["q"] = 10
	rep := b.check(t, nil)
	want := map[string]int{CauseNackUnknown: 1, CauseAckUnknown: 1, CauseAckLate: 1, CauseRejectFailed: 2,
		CauseUnseenLease: 1, CauseAttemptReused: 1, CauseRedriven: 1}
	if !reflect.DeepEqual(rep.Duplicates, want) {
		t.Errorf("duplicates %v, want %v", rep.Duplicates, want)
	}
}

func TestOutcomeOf(t *testing.T) {
	cases := []struct {
		err  error
		want Outcome
	}{
		{nil, OK},
		{fmt.Errorf("send: %w", client.ErrUnconfirmed), Unknown},
		{context.DeadlineExceeded, Unknown},
		{fmt.Errorf("%w (last failure: %w)", context.DeadlineExceeded, client.ErrUnavailable), Unknown},
		{client.ErrLeaseLost, Failed},
		{errors.New("queue full"), Failed},
	}
	for _, tc := range cases {
		if got := outcomeOf(tc.err); got != tc.want {
			t.Errorf("outcomeOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestSchedules_ReplayFromSeed(t *testing.T) {
	a, b := BoundedSchedule(42), BoundedSchedule(42)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different bounded schedules")
	}
	seen := map[FaultKind]int{}
	for _, s := range a {
		seen[s.Kind]++
		if (s.Kind == PauseLeader || s.Kind == PauseFollower) && s.Hold < 3*time.Second {
			t.Errorf("%s held %v: pauses must outlast the election timeout", s.Kind, s.Hold)
		}
	}
	for _, k := range AllFaults {
		if seen[k] != 1 {
			t.Errorf("bounded schedule has %s %d times", k, seen[k])
		}
	}
	for _, k := range []FaultKind{DiskFull, FsyncError, WriteError} {
		if seen[k] != 1 {
			t.Errorf("bounded schedule lacks the disk fault %s", k)
		}
	}
	if reflect.DeepEqual(a, BoundedSchedule(43)) {
		t.Error("different seeds, same schedule")
	}
	la, lb := LongSchedule(7), LongSchedule(7)
	for i := 0; i < 50; i++ {
		if x, y := la(), lb(); x != y {
			t.Fatalf("long schedule step %d differs: %+v vs %+v", i, x, y)
		}
	}
}

// While a clock fault ran a node ahead, a lease stamped after an ack by
// less than the lead is not judged later than the ack; outside the fault,
// or by more than the lead, it is.
func TestCheck_AckedRedeliveredAllowsForClockFaults(t *testing.T) {
	b := newHist()
	b.final.ClockSkews = skewWindows([]FaultRecord{{Kind: ClockJump, Start: ms(0), Healed: ms(5000), ClockOffset: 3 * time.Second}})
	b.send("a", "", -1, OK, 0).send("b", "", -1, OK, 0)
	// a: the lease's stamp is 2 s after the ack, its receive returned
	// before the ack: a leader 3 s ahead stamped it.
	b.settle(b.deliver("a", 1, 10, 20, ActAck), SettleAck, OK, 30, 100)
	n := b.deliver("a", 2, 50, 60, ActAck)
	b.h.Deliveries[n].LeasedAt = ms(2100)
	b.settle(n, SettleAck, Failed, 70, 80)
	// b: leased long after the window closed.
	b.settle(b.deliver("b", 1, 10, 20, ActAck), SettleAck, OK, 30, 100)
	b.settle(b.deliver("b", 2, 60000, 60010, ActAck), SettleAck, Failed, 60020, 60030)
	b.check(t, map[string]int{VAckedRedelivered: 1})
	if w := skewWindows([]FaultRecord{{Kind: ClockBehind, Start: ms(0), Healed: ms(5000), ClockOffset: -time.Hour}}); len(w) != 0 {
		t.Fatalf("a clock behind gave skew windows %v", w)
	}
}

func TestErrorClass_FoldsNumbersIntoOneKey(t *testing.T) {
	a := errorClass("partition 12 of q: not leader (leader n3), 1024 bytes")
	b := errorClass("partition 7 of q: not leader (leader n1), 99 bytes")
	if a != b || a != "partition # of q: not leader (leader n#), # bytes" {
		t.Fatalf("classes %q and %q", a, b)
	}
	m := map[string]int{"x": 1, "y": 5, "z": 3}
	if got := topKeys(m, 2); len(got) != 2 || got[0] != "y" || got[1] != "z" {
		t.Fatalf("topKeys = %v", got)
	}
}

// A fault's longest send stall runs from a message's first attempt to its
// confirmation, over the messages whose sending started during the fault;
// one never confirmed counts until its last attempt ended.
func TestLongestSendStall(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	h := History{Sends: []*Send{
		{ID: "before", Attempts: []SendAttempt{{Start: at(-5), End: at(20), Outcome: OK}}},
		{ID: "retried", Attempts: []SendAttempt{{Start: at(1), End: at(2), Outcome: Unknown}, {Start: at(2.5), End: at(2.8), Outcome: OK}}},
		{ID: "failed", Attempts: []SendAttempt{{Start: at(3), End: at(3.5), Outcome: Failed}}},
		{ID: "after", Attempts: []SendAttempt{{Start: at(11), End: at(30), Outcome: OK}}},
	}}
	if got := longestSendStall(h, at(0), at(10)); got != 1800*time.Millisecond {
		t.Fatalf("stall %v, want 1.8s (the retried message)", got)
	}
	faults := []FaultRecord{{Kind: RollingRestart, Start: at(0), Healed: at(4), Recovered: at(10)}, {Kind: DrainNode, Skipped: "no"}}
	noteSendStalls(h, faults)
	if faults[0].LongestSendStall != 1800*time.Millisecond || faults[1].LongestSendStall != 0 {
		t.Fatalf("noted %v and %v", faults[0].LongestSendStall, faults[1].LongestSendStall)
	}
	if line := faults[0].Line(t0); !strings.Contains(line, "longest send stall 1.8s") {
		t.Fatalf("line %q", line)
	}
}
