package chaos

import (
	"fmt"
	"sort"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Violation kinds. Any violation fails the run.
const (
	// VLost: a confirmed message was neither acked, nor dead-lettered,
	// nor still present at the end.
	VLost = "lost"
	// VUnexpected: a delivery or dead letter of a message that was never
	// sent, or whose every send attempt definitely failed.
	VUnexpected = "unexpected"
	// VGroupOrder: a message of a group was leased while an earlier
	// message of the group could not yet have been acked or
	// dead-lettered.
	VGroupOrder = "group-order"
	// VAckedRedelivered: a message was delivered by a receive that started
	// after an ack of it had been confirmed.
	VAckedRedelivered = "acked-then-redelivered"
	// VSpuriousDead: a dead letter that our consumers neither rejected
	// nor let exhaust its receives, or one whose ack was confirmed.
	VSpuriousDead = "spurious-dead-letter"
	// VDiverged: the replicas of a partition did not agree on digest and
	// applied index after healing.
	VDiverged = "replicas-diverged"
	// VPriority: a delivery or dead letter carried another priority
	// than the one its message was sent with.
	VPriority = "priority-changed"
	// VIncomplete: the final state could not be established (the queues
	// did not drain or the dead letters could not be listed), so the
	// other checks are not complete.
	VIncomplete = "incomplete"
)

// ViolationKinds lists every kind, in report order.
var ViolationKinds = []string{VLost, VUnexpected, VGroupOrder, VAckedRedelivered, VSpuriousDead, VDiverged, VPriority, VIncomplete}

// maxListed bounds the violations of one kind kept with their details.
const maxListed = 25

// Violation is one broken guarantee.
type Violation struct {
	Kind   string `json:"kind"`
	ID     string `json:"id,omitempty"`
	Queue  string `json:"queue,omitempty"`
	Group  string `json:"group,omitempty"`
	Detail string `json:"detail"`
}

// checker holds the indexes of one Check.
type checker struct {
	h         History
	final     Final
	sends     map[string]*Send
	delivered map[string][]Delivery // by message id, in attempt order
	settles   map[int][]Settle      // by delivery number, in start order
	dead      map[string]DeadLetter // by message id
	rep       *Report
}

// Check verifies a run's history against the final state. It is a pure
// function: everything it needs is in its arguments.
func Check(h History, final Final) *Report {
	c := &checker{
		h: h, final: final,
		sends:     map[string]*Send{},
		delivered: sortedDeliveries(h),
		settles:   map[int][]Settle{},
		dead:      map[string]DeadLetter{},
		rep:       newReport(),
	}
	for _, s := range h.Sends {
		c.sends[s.ID] = s
	}
	for _, s := range h.Settles {
		c.settles[s.Delivery] = append(c.settles[s.Delivery], s)
	}
	for _, ss := range c.settles {
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].Start.Before(ss[j].Start) })
	}
	for _, d := range final.DeadLetters {
		c.dead[d.ID] = d
	}
	c.count()
	c.checkComplete()
	c.checkUnexpected()
	c.checkPriorities()
	c.checkLost()
	c.checkGroupOrder()
	c.checkAckedRedelivered()
	c.checkDeadLetters()
	c.checkConvergence()
	c.duplicates()
	c.unknownSends()
	c.rep.Latency = latencies(h)
	c.rep.Gaps = availabilityGaps(h, time.Second)
	return c.rep
}

func (c *checker) violate(v Violation) { c.rep.addViolation(v) }

// addViolation counts v, and lists it while its kind has fewer than
// maxListed listed.
func (r *Report) addViolation(v Violation) {
	r.ViolationCounts[v.Kind]++
	if r.ViolationCounts[v.Kind] <= maxListed {
		r.Violations = append(r.Violations, v)
	}
}

// count fills the report's plain counts.
func (c *checker) count() {
	n := &c.rep.Counts
	n.Messages = len(c.h.Sends)
	for _, s := range c.h.Sends {
		switch s.Status() {
		case OK:
			n.Confirmed++
		case Unknown:
			n.Unknown++
		default:
			n.Failed++
		}
		for _, a := range s.Attempts {
			n.SendAttempts[a.Outcome]++
			if a.Outcome == Failed {
				n.SendFailures[errorClass(a.Err)]++
			}
		}
	}
	n.Deliveries = len(c.h.Deliveries)
	for _, d := range c.h.Deliveries {
		if d.RecvEnd.After(d.Deadline) {
			n.ExpiredOnArrival++
		}
	}
	n.DeliveredMessages = len(c.delivered)
	acked := map[string]bool{}
	for _, s := range c.h.Settles {
		n.Settles[string(s.Kind)+"/"+string(s.Outcome)]++
		if s.Kind == SettleAck && s.Outcome == OK {
			acked[c.h.Deliveries[s.Delivery].ID] = true
		}
	}
	n.Acked = len(acked)
	n.DeadLettered = len(c.final.DeadLetters)
	for _, d := range c.final.DeadLetters {
		n.DeadByReason[d.Reason]++
	}
}

func (c *checker) checkComplete() {
	if !c.final.Drained {
		c.violate(Violation{Kind: VIncomplete, Detail: fmt.Sprintf("queues did not drain: %v left", c.final.Remaining)})
	}
	if !c.final.DeadListed {
		c.violate(Violation{Kind: VIncomplete, Detail: "dead letters could not be listed"})
	}
}

// checkUnexpected flags deliveries and dead letters of messages never sent,
// or sent only by attempts that definitely failed.
func (c *checker) checkUnexpected() {
	seen := map[string]bool{}
	flag := func(id, queue, what string) {
		if seen[id] {
			return
		}
		seen[id] = true
		s := c.sends[id]
		switch {
		case s == nil:
			c.violate(Violation{Kind: VUnexpected, ID: id, Queue: queue, Detail: what + " of a message never sent"})
		case s.Status() == Failed:
			c.violate(Violation{Kind: VUnexpected, ID: id, Queue: queue, Group: s.Group,
				Detail: what + " of a message whose every send definitely failed: " + lastErr(s)})
		}
	}
	for _, d := range c.h.Deliveries {
		flag(d.ID, d.Queue, "delivery")
	}
	for _, d := range c.final.DeadLetters {
		flag(d.ID, d.Queue, "dead letter")
	}
}

// checkPriorities flags a delivery or dead letter whose priority is not
// the one its message was sent with (a redrive keeps it).
func (c *checker) checkPriorities() {
	flag := func(id, queue, what string, got client.Priority) {
		if s := c.sends[id]; s != nil && s.Priority != got {
			c.violate(Violation{Kind: VPriority, ID: id, Queue: queue, Group: s.Group,
				Detail: fmt.Sprintf("%s with priority %d, sent with %d", what, got, s.Priority)})
		}
	}
	for _, d := range c.h.Deliveries {
		flag(d.ID, d.Queue, "delivery", d.Priority)
	}
	for _, d := range c.final.DeadLetters {
		flag(d.ID, d.Queue, "dead letter", d.Priority)
	}
}

func lastErr(s *Send) string {
	if len(s.Attempts) == 0 {
		return "no attempt"
	}
	return s.Attempts[len(s.Attempts)-1].Err
}

// mayHaveAcked reports whether an ack of the message was confirmed or may
// have taken effect.
func (c *checker) mayHaveAcked(id string) bool {
	for _, d := range c.delivered[id] {
		for _, s := range c.settles[d.N] {
			if s.Kind == SettleAck && s.Outcome != Failed {
				return true
			}
		}
	}
	return false
}

// checkLost: with the queues drained, a confirmed message must have been
// acked (possibly by an ack whose outcome was unknown: nothing else could
// have removed it) or be among the dead letters.
func (c *checker) checkLost() {
	if !c.final.Drained || !c.final.DeadListed {
		return
	}
	for _, s := range c.h.Sends {
		if s.Status() != OK {
			continue
		}
		if _, dead := c.dead[s.ID]; dead || c.mayHaveAcked(s.ID) {
			continue
		}
		detail := "confirmed, never delivered"
		if ds := c.delivered[s.ID]; len(ds) > 0 {
			detail = fmt.Sprintf("confirmed, delivered %d times, never acked, not dead-lettered", len(ds))
		}
		c.violate(Violation{Kind: VLost, ID: s.ID, Queue: s.Queue, Group: s.Group,
			Detail: fmt.Sprintf("%s (seq %d, confirmed at %s)", detail, confirmedSeq(s), stamp(s.ConfirmedAt()))})
	}
}

func confirmedSeq(s *Send) uint64 {
	for _, a := range s.Attempts {
		if a.Outcome == OK {
			return a.Seq
		}
	}
	return 0
}

// stamp formats a time for violation details.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format("15:04:05.000000")
}

// checkAckedRedelivered: once an ack returned nil, no lease of the message
// may be granted later. A lease counts as later when the leader's clock
// had passed the ack's return when it granted it: a delivery handed out
// late from a client's buffer, or leased while the ack was under way, is
// not a violation. While a clock fault ran a node ahead, the leader's
// clock may have been ahead of the harness's: its stamps count as early as
// they can stand for (Final.ClockSkews).
func (c *checker) checkAckedRedelivered() {
	for id, ds := range c.delivered {
		var ackedAt time.Time
		for _, d := range ds {
			for _, s := range c.settles[d.N] {
				if s.Kind == SettleAck && s.Outcome == OK && (ackedAt.IsZero() || s.End.Before(ackedAt)) {
					ackedAt = s.End
				}
			}
		}
		if ackedAt.IsZero() {
			continue
		}
		for _, d := range ds {
			if c.final.unskew(d.LeasedAt).After(ackedAt) {
				c.violate(Violation{Kind: VAckedRedelivered, ID: id, Queue: d.Queue, Group: d.Group,
					Detail: fmt.Sprintf("ack confirmed at %s, leased again (attempt %d to %s) at %s (receive returned %s)",
						stamp(ackedAt), d.Attempt, d.Consumer, stamp(d.LeasedAt), stamp(d.RecvEnd))})
			}
		}
	}
}

// checkDeadLetters: each dead letter was rejected by one of our consumers
// or used up its receives, and none is of a message whose ack was
// confirmed.
func (c *checker) checkDeadLetters() {
	for _, d := range c.final.DeadLetters {
		s := c.sends[d.ID]
		if s == nil {
			continue // reported as unexpected
		}
		if reason := c.deadLetterProblem(d); reason != "" {
			c.violate(Violation{Kind: VSpuriousDead, ID: d.ID, Queue: d.Queue, Group: d.Group,
				Detail: fmt.Sprintf("%s (reason %q, attempts %d, history %v)", reason, d.Reason, d.Attempts, d.History)})
		}
	}
}

// deadLetterProblem says what is wrong with a dead letter, or "".
func (c *checker) deadLetterProblem(d DeadLetter) string {
	var rejected, acked bool
	for _, dl := range c.delivered[d.ID] {
		for _, s := range c.settles[dl.N] {
			rejected = rejected || (s.Kind == SettleReject && s.Outcome != Failed)
			acked = acked || (s.Kind == SettleAck && s.Outcome == OK)
		}
	}
	maxReceives := c.final.MaxReceives[d.Queue]
	switch {
	case acked:
		return "its ack was confirmed"
	case d.Code == client.DeadRejected && !rejected:
		return "rejected, but no consumer rejected it"
	case d.Code == client.DeadRejected:
		return ""
	case d.Code == client.DeadRetriesExhausted || d.Code == client.DeadLeaseExpired:
		if maxReceives > 0 && int(d.Attempts) >= maxReceives {
			return ""
		}
		return fmt.Sprintf("only %d of %d receives used", d.Attempts, maxReceives)
	}
	return "unknown reason"
}

// checkConvergence: every partition's replicas agree.
func (c *checker) checkConvergence() {
	for _, cv := range c.final.Convergence {
		if !cv.Agreed {
			c.violate(Violation{Kind: VDiverged, Queue: cv.Queue,
				Detail: fmt.Sprintf("group %s (partition %d): replicas %v", cv.Group, cv.Partition, cv.Replicas)})
		}
	}
	if len(c.final.Convergence) == 0 {
		c.violate(Violation{Kind: VDiverged, Detail: "no replica state could be read"})
	}
}
