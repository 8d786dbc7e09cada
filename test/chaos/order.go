package chaos

import (
	"fmt"
	"sort"
	"time"
)

// forever stands for "not finished" in finish times.
var forever = time.Unix(1<<40, 0)

// finishedBy returns the earliest time a message can have left its group:
// the start of an ack or reject that did not definitely fail, of a nack on
// the last allowed receive, the deadline of the last allowed lease (whose
// expiry dead-letters it), or its dead-lettering time (server stamps, taken
// as early as clock faults allow). forever if none.
func (c *checker) finishedBy(id, queue string) time.Time {
	t := forever
	earlier := func(u time.Time) {
		if !u.IsZero() && u.Before(t) {
			t = u
		}
	}
	maxReceives := c.final.MaxReceives[queue]
	for _, d := range c.delivered[id] {
		last := maxReceives > 0 && int(d.Attempt) >= maxReceives
		if last {
			earlier(c.final.unskew(d.Deadline))
		}
		for _, s := range c.settles[d.N] {
			if s.Outcome == Failed {
				continue
			}
			if s.Kind != SettleNack || last {
				earlier(s.Start)
			}
		}
	}
	if dl, ok := c.dead[id]; ok {
		earlier(c.final.unskew(dl.DeadAt))
	}
	return t
}

// groupKey names a group of a queue.
type groupKey struct{ queue, group string }

// groupMembers returns each group's messages in send order: those
// confirmed, and those of unknown or failed outcome that were delivered
// anyway (they exist, so they hold their place).
func (c *checker) groupMembers() map[groupKey][]*Send {
	out := map[groupKey][]*Send{}
	for _, s := range c.h.Sends {
		if s.Group == "" {
			continue
		}
		if s.Status() != OK && len(c.delivered[s.ID]) == 0 {
			continue
		}
		k := groupKey{s.Queue, s.Group}
		out[k] = append(out[k], s)
	}
	for _, ms := range out {
		sort.SliceStable(ms, func(i, j int) bool {
			if ms[i].Producer != ms[j].Producer {
				return ms[i].Producer < ms[j].Producer
			}
			return ms[i].GroupIndex < ms[j].GroupIndex
		})
	}
	return out
}

// checkGroupOrder: no message of a group is leased (its receive returned)
// before every earlier message of the group could have been finished.
func (c *checker) checkGroupOrder() {
	for k, ms := range c.groupMembers() {
		if producers(ms) > 1 {
			c.violate(Violation{Kind: VGroupOrder, Queue: k.queue, Group: k.group,
				Detail: "the workload broke its own rule: more than one producer sent to this group"})
			continue
		}
		var blockedUntil time.Time // latest finish among earlier messages
		var blocker *Send
		for _, s := range ms {
			for _, d := range c.delivered[s.ID] {
				if blocker != nil && d.RecvEnd.Before(blockedUntil) {
					c.violate(Violation{Kind: VGroupOrder, ID: s.ID, Queue: k.queue, Group: k.group,
						Detail: fmt.Sprintf("attempt %d leased by %s before %s; earlier message %s (index %d) finished %s",
							d.Attempt, d.Consumer, stamp(d.RecvEnd), blocker.ID, blocker.GroupIndex, finishText(blockedUntil))})
				}
			}
			if f := c.finishedBy(s.ID, s.Queue); blocker == nil || f.After(blockedUntil) {
				blockedUntil, blocker = f, s
			}
		}
	}
}

func finishText(t time.Time) string {
	if t.Equal(forever) {
		return "never"
	}
	return "at " + stamp(t) + " at the earliest"
}

func producers(ms []*Send) int {
	seen := map[string]bool{}
	for _, s := range ms {
		seen[s.Producer] = true
	}
	return len(seen)
}

// Duplicate causes.
const (
	CauseNack          = "nack"
	CauseNackUnknown   = "nack unconfirmed"
	CauseAbandon       = "abandoned lease (consumer crash)"
	CauseSlow          = "lease expired (slow consumer)"
	CauseUnsettled     = "lease expired (never settled)"
	CauseAckUnknown    = "ack unconfirmed"
	CauseAckFailed     = "ack failed"
	CauseAckLate       = "lease expired before the ack arrived"
	CauseAckRaced      = "redelivered before the ack was confirmed"
	CauseRejectFailed  = "reject not confirmed"
	CauseNackFailed    = "nack failed (lease expired)"
	CauseUnseenLease   = "unseen lease (receive answer lost)"
	CauseAttemptReused = "same attempt delivered twice"
	CauseRedriven      = "redriven from the dead letters"
)

// duplicates counts the deliveries beyond each message's first, by the
// cause seen on the delivery before.
func (c *checker) duplicates() {
	for _, ds := range c.delivered {
		if len(ds) > 1 {
			c.rep.Counts.Redelivered++
		}
		for i := 1; i < len(ds); i++ {
			c.rep.Duplicates[c.cause(ds[i-1], ds[i])]++
			c.rep.Counts.Duplicates++
		}
	}
}

// cause explains why next followed prev.
func (c *checker) cause(prev, next Delivery) string {
	switch {
	case next.Seq != prev.Seq:
		// A redrive enqueues the dead letter again under a new seq, its
		// attempts counted from zero.
		return CauseRedriven
	case next.Attempt == prev.Attempt:
		return CauseAttemptReused
	case next.Attempt > prev.Attempt+1:
		return CauseUnseenLease
	}
	ss := c.settles[prev.N]
	if len(ss) == 0 {
		if prev.Action == ActAbandon {
			return CauseAbandon
		}
		return CauseUnsettled
	}
	s := ss[len(ss)-1]
	switch {
	case s.Kind == SettleNack && s.Outcome == OK:
		return CauseNack
	case s.Kind == SettleNack && s.Outcome == Unknown:
		return CauseNackUnknown
	case s.Kind == SettleNack:
		return CauseNackFailed
	case s.Kind == SettleReject:
		return CauseRejectFailed
	case s.Outcome == Unknown:
		return CauseAckUnknown
	case s.Outcome == OK:
		return CauseAckRaced
	case prev.Action == ActSlow:
		return CauseSlow
	case s.LeaseLost || s.Gone:
		return CauseAckLate
	}
	return CauseAckFailed
}
