package chaos

import (
	"sort"
	"time"
)

// Percentiles summarize a latency distribution.
type Percentiles struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50"`
	P90 time.Duration `json:"p90"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

// percentiles computes the summary of ds (which it sorts).
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return Percentiles{N: len(ds), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: ds[len(ds)-1]}
}

// latencies reports confirmed sends (the confirmed attempt, and the whole
// message from its first attempt), receives that delivered, and confirmed
// acks.
func latencies(h History) map[string]Percentiles {
	var attempt, message, recv, ack []time.Duration
	for _, s := range h.Sends {
		for _, a := range s.Attempts {
			if a.Outcome == OK {
				attempt = append(attempt, a.End.Sub(a.Start))
				message = append(message, a.End.Sub(s.Attempts[0].Start))
				break
			}
		}
	}
	for _, d := range h.Deliveries {
		recv = append(recv, d.RecvEnd.Sub(d.RecvStart))
	}
	for _, s := range h.Settles {
		if s.Kind == SettleAck && s.Outcome == OK {
			ack = append(ack, s.End.Sub(s.Start))
		}
	}
	return map[string]Percentiles{
		"send (confirmed attempt)": percentiles(attempt),
		"send (message, retries)":  percentiles(message),
		"receive (with long poll)": percentiles(recv),
		"ack (confirmed)":          percentiles(ack),
	}
}

// Gap is a stretch of time in which no send (or no ack) was confirmed.
type Gap struct {
	What  string        `json:"what"`
	From  time.Time     `json:"from"`
	To    time.Time     `json:"to"`
	Span  time.Duration `json:"span"`
	Fault string        `json:"fault,omitempty"` // filled by the run
}

// availabilityGaps finds the stretches longer than minGap between
// consecutive confirmed sends, and between consecutive confirmed acks,
// longest first.
func availabilityGaps(h History, minGap time.Duration) []Gap {
	var sends, acks []time.Time
	for _, s := range h.Sends {
		for _, a := range s.Attempts {
			if a.Outcome == OK {
				sends = append(sends, a.End)
			}
		}
	}
	for _, s := range h.Settles {
		if s.Kind == SettleAck && s.Outcome == OK {
			acks = append(acks, s.End)
		}
	}
	gaps := append(gapsIn("send", sends, minGap), gapsIn("ack", acks, minGap)...)
	sort.SliceStable(gaps, func(i, j int) bool { return gaps[i].Span > gaps[j].Span })
	return gaps
}

func gapsIn(what string, ts []time.Time, minGap time.Duration) []Gap {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	var out []Gap
	for i := 1; i < len(ts); i++ {
		if span := ts[i].Sub(ts[i-1]); span > minGap {
			out = append(out, Gap{What: what, From: ts[i-1], To: ts[i], Span: span})
		}
	}
	return out
}

// unknownSends sorts the messages that had an unconfirmed attempt by what
// became of them.
func (c *checker) unknownSends() {
	u := &c.rep.UnknownSends
	for _, s := range c.h.Sends {
		had := false
		for _, a := range s.Attempts {
			had = had || a.Outcome == Unknown
		}
		if !had {
			continue
		}
		switch {
		case s.Status() == OK:
			u.ConfirmedOnRetry++
		case len(c.delivered[s.ID]) > 0:
			u.Delivered++
		default:
			u.NeverSeen++
		}
	}
}

// longestSendStall is the longest a message waited, from its first send
// attempt to its confirmation, among the messages whose first attempt
// started within [from, to]; a message never confirmed counts until its
// last attempt ended. It is what a producer feels of a fault: retries
// hide failures, not the wait.
func longestSendStall(h History, from, to time.Time) time.Duration {
	var longest time.Duration
	for _, s := range h.Sends {
		if len(s.Attempts) == 0 {
			continue
		}
		first := s.Attempts[0].Start
		if first.Before(from) || first.After(to) {
			continue
		}
		end := s.Attempts[len(s.Attempts)-1].End
		for _, a := range s.Attempts {
			if a.Outcome == OK {
				end = a.End
				break
			}
		}
		longest = max(longest, end.Sub(first))
	}
	return longest
}

// noteSendStalls records, on every fault that ran, the longest send stall
// of the messages whose sending started while it was in force.
func noteSendStalls(h History, faults []FaultRecord) {
	for i := range faults {
		f := &faults[i]
		if f.Skipped != "" || f.Start.IsZero() {
			continue
		}
		end := f.Recovered
		if end.IsZero() {
			end = f.Healed
		}
		f.LongestSendStall = longestSendStall(h, f.Start, end)
	}
}
