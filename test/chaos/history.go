package chaos

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/ferrymq/ferry/client"
)

// Outcome is what a client call is known to have done.
type Outcome string

// Outcomes of a call.
const (
	// OK: the call returned success; its effect is confirmed.
	OK Outcome = "ok"
	// Failed: the call failed and certainly had no effect.
	Failed Outcome = "failed"
	// Unknown: the call may or may not have taken effect
	// (client.ErrUnconfirmed, or the context ended mid-call).
	Unknown Outcome = "unknown"
)

// outcomeOf classifies a call's error. Context expiry is counted as
// unknown whatever the client says, to stay on the safe side.
func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, client.ErrUnconfirmed),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return Unknown
	}
	return Failed
}

// SendAttempt is one Send call for a message.
type SendAttempt struct {
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Outcome   Outcome   `json:"outcome"`
	Err       string    `json:"err,omitempty"`
	Partition int       `json:"partition"`
	Seq       uint64    `json:"seq,omitempty"`
	Duplicate bool      `json:"duplicate,omitempty"`
}

// Send is one message a producer created, with every attempt to send it.
// Producers send one message at a time, so GroupIndex (the message's
// position among its producer's messages of the group) is the group's send
// order: by seq (a redriven message comes back under a higher one), then
// attempt, then receive start.
type Send struct {
	ID         string        `json:"id"`
	Queue      string        `json:"queue"`
	Group      string        `json:"group,omitempty"`
	GroupIndex int           `json:"group_index"`
	Producer   string        `json:"producer"`
	Delay      time.Duration `json:"delay,omitempty"`
	// Priority is the priority it was sent with (0..client.MaxPriority).
	Priority client.Priority `json:"priority,omitempty"`
	Attempts []SendAttempt   `json:"attempts"`
}

// Status folds the attempts: OK if any was confirmed, else Unknown if any
// may have stored the message, else Failed.
func (s *Send) Status() Outcome {
	st := Failed
	for _, a := range s.Attempts {
		switch a.Outcome {
		case OK:
			return OK
		case Unknown:
			st = Unknown
		}
	}
	return st
}

// ConfirmedAt is when the first confirmed attempt returned (zero if none).
func (s *Send) ConfirmedAt() time.Time {
	for _, a := range s.Attempts {
		if a.Outcome == OK {
			return a.End
		}
	}
	return time.Time{}
}

// Delivery is one lease a consumer received. RecvStart and RecvEnd are
// the Receive call that returned it; the lease may have been granted
// earlier, when it comes from the client's buffer (the late answer of an
// earlier long poll). LeasedAt is the leader's clock when it granted the
// lease (its deadline less the visibility): the lease was granted at
// LeasedAt or later, and by RecvEnd.
type Delivery struct {
	N         int       `json:"n"`
	ID        string    `json:"id"`
	Queue     string    `json:"queue"`
	Group     string    `json:"group,omitempty"`
	Partition int       `json:"partition"`
	Seq       uint64    `json:"seq"`
	Attempt   uint32    `json:"attempt"`
	Consumer  string    `json:"consumer"`
	RecvStart time.Time `json:"recv_start"`
	RecvEnd   time.Time `json:"recv_end"`
	Deadline  time.Time `json:"deadline"`
	LeasedAt  time.Time `json:"leased_at"`
	// Priority is the priority the delivery carried.
	Priority client.Priority `json:"priority,omitempty"`
	// Action is what the consumer decided to do with it.
	Action Action `json:"action"`
}

// Action is a consumer's plan for a delivery.
type Action string

// Consumer actions.
const (
	ActAck     Action = "ack"
	ActNack    Action = "nack"
	ActReject  Action = "reject"
	ActAbandon Action = "abandon" // simulated consumer crash: the lease is dropped
	ActSlow    Action = "slow"    // processed past the visibility timeout, then acked
)

// SettleKind names a lease operation.
type SettleKind string

// Lease operations.
const (
	SettleAck    SettleKind = "ack"
	SettleNack   SettleKind = "nack"
	SettleReject SettleKind = "reject"
)

// Settle is one ack, nack or reject call on a delivery.
type Settle struct {
	Delivery  int        `json:"delivery"`
	Kind      SettleKind `json:"kind"`
	Start     time.Time  `json:"start"`
	End       time.Time  `json:"end"`
	Outcome   Outcome    `json:"outcome"`
	LeaseLost bool       `json:"lease_lost,omitempty"` // client.ErrLeaseLost
	Gone      bool       `json:"gone,omitempty"`       // client.ErrMessageNotFound
	Err       string     `json:"err,omitempty"`
}

// History is everything the workload did, as the clients saw it.
type History struct {
	Sends      []*Send    `json:"sends"`
	Deliveries []Delivery `json:"deliveries"`
	Settles    []Settle   `json:"settles"`
}

// Recorder collects a History from many goroutines.
type Recorder struct {
	mu sync.Mutex
	h  History
}

// now returns the wall-clock time without its monotonic reading, so that
// it compares with the times servers stamp.
func now() time.Time { return time.Now().Round(0) }

// NewSend registers a message about to be sent.
func (r *Recorder) NewSend(s *Send) {
	r.mu.Lock()
	r.h.Sends = append(r.h.Sends, s)
	r.mu.Unlock()
}

// SendAttempt records one attempt of s.
func (r *Recorder) SendAttempt(s *Send, a SendAttempt) {
	r.mu.Lock()
	s.Attempts = append(s.Attempts, a)
	r.mu.Unlock()
}

// Deliver records a delivery and returns its number.
func (r *Recorder) Deliver(d Delivery) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	d.N = len(r.h.Deliveries)
	r.h.Deliveries = append(r.h.Deliveries, d)
	return d.N
}

// Settle records a lease operation.
func (r *Recorder) Settle(s Settle) {
	r.mu.Lock()
	r.h.Settles = append(r.h.Settles, s)
	r.mu.Unlock()
}

// Snapshot returns a deep copy of the history so far.
func (r *Recorder) Snapshot() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := History{
		Deliveries: append([]Delivery(nil), r.h.Deliveries...),
		Settles:    append([]Settle(nil), r.h.Settles...),
	}
	for _, s := range r.h.Sends {
		c := *s
		c.Attempts = append([]SendAttempt(nil), s.Attempts...)
		out.Sends = append(out.Sends, &c)
	}
	return out
}

// DeadLetter is a dead letter as listed at the end of a run.
type DeadLetter struct {
	Queue          string            `json:"queue"`
	Partition      int               `json:"partition"`
	Seq            uint64            `json:"seq"`
	ID             string            `json:"id"`
	Group          string            `json:"group,omitempty"`
	Attempts       uint32            `json:"attempts"`
	Code           client.DeadReason `json:"code"`
	Reason         string            `json:"reason"`
	ReasonText     string            `json:"reason_text,omitempty"`
	DeadAt         time.Time         `json:"dead_at"`
	LastConsumer   string            `json:"last_consumer,omitempty"`
	History        []string          `json:"history,omitempty"`
	FirstDelivered time.Time         `json:"first_delivered"`
	LastDelivered  time.Time         `json:"last_delivered"`
	Priority       client.Priority   `json:"priority,omitempty"`
}

// deadLetterOf converts a client dead letter.
func deadLetterOf(queue string, l client.DeadLetter) DeadLetter {
	d := DeadLetter{
		Queue: queue, Partition: l.Partition, Seq: l.Seq, ID: l.ID, Group: l.Group,
		Attempts: l.Attempts, Code: l.Reason, Reason: l.Reason.String(), ReasonText: l.ReasonText,
		DeadAt: l.DeadAt, LastConsumer: l.LastConsumer,
		FirstDelivered: l.FirstDeliveredAt, LastDelivered: l.LastDeliveredAt, Priority: l.Priority,
	}
	for _, e := range l.History {
		d.History = append(d.History, e.Kind.String()+"@"+itoa(int(e.Attempt)))
	}
	return d
}

// Convergence is the replicas' agreement on one raft group after healing.
type Convergence struct {
	Group        string   `json:"group"`
	Queue        string   `json:"queue"`
	Partition    int      `json:"partition"`
	Agreed       bool     `json:"agreed"`
	AppliedIndex uint64   `json:"applied_index"`
	Replicas     []string `json:"replicas"` // "node@index:digest-prefix"
}

// Final is the cluster's state after healing and draining.
type Final struct {
	// Drained is set when every queue was seen empty (nothing ready,
	// delayed or leased) with no delivery left in the consumers' hands.
	Drained bool `json:"drained"`
	// Remaining counts the messages still present per queue when the
	// drain gave up.
	Remaining map[string]int64 `json:"remaining,omitempty"`
	// DeadLetters lists every queue's dead letters.
	DeadLetters []DeadLetter `json:"dead_letters"`
	// DeadListed is set when the dead letters of every queue could be
	// listed.
	DeadListed bool `json:"dead_listed"`
	// MaxReceives is each queue's max_receives.
	MaxReceives map[string]int `json:"max_receives"`
	// Convergence has one entry per partition.
	Convergence []Convergence `json:"convergence"`
	// ClockSkews are the windows in which a node's clock ran ahead (clock
	// faults): server times stamped then (lease deadlines, dead-lettering
	// times) may be ahead of the harness's clock by up to Ahead.
	ClockSkews []SkewWindow `json:"clock_skews,omitempty"`
}

// SkewWindow is a stretch of harness time in which server stamps may run
// up to Ahead ahead of it.
type SkewWindow struct {
	From  time.Time     `json:"from"`
	To    time.Time     `json:"to"`
	Ahead time.Duration `json:"ahead"`
}

// maxClockStep mirrors partition.DefaultMaxClockStep: no command moves a
// partition's clock further than this, so a node further ahead moves none.
const maxClockStep = 10 * time.Second

// skewWindows turns the clock faults of a run into the windows in which
// server stamps may be ahead: from the fault's start until it healed plus
// the lead (a partition's clock pushed ahead stays ahead until real time
// catches up), plus a second of slack. A node behind pushes nothing ahead.
func skewWindows(faults []FaultRecord) []SkewWindow {
	var out []SkewWindow
	for _, f := range faults {
		if f.ClockOffset <= 0 {
			continue
		}
		ahead := min(f.ClockOffset, maxClockStep) + time.Second
		end := f.Healed
		if end.IsZero() {
			end = f.Start.Add(time.Hour)
		}
		out = append(out, SkewWindow{From: f.Start, To: end.Add(ahead), Ahead: ahead})
	}
	return out
}

// aheadAt returns how far server stamps may run ahead of the harness's
// clock around server time t.
func (f Final) aheadAt(t time.Time) time.Duration {
	var d time.Duration
	for _, w := range f.ClockSkews {
		if !t.Before(w.From) && !t.After(w.To.Add(w.Ahead)) {
			d = max(d, w.Ahead)
		}
	}
	return d
}

// unskew moves a server stamp back by the most its clock may have run
// ahead then: the earliest harness time it can stand for.
func (f Final) unskew(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-f.aheadAt(t))
}

// sortedDeliveries returns the deliveries of each message in receive
// order: by seq (a redriven message comes back under a higher one), then
// attempt, then receive start.
func sortedDeliveries(h History) map[string][]Delivery {
	out := map[string][]Delivery{}
	for _, d := range h.Deliveries {
		out[d.ID] = append(out[d.ID], d)
	}
	for _, ds := range out {
		sort.SliceStable(ds, func(i, j int) bool {
			// A redrive enqueues the message again under a higher seq of
			// the same partition, its attempts counted from zero.
			if ds[i].Seq != ds[j].Seq {
				return ds[i].Seq < ds[j].Seq
			}
			if ds[i].Attempt != ds[j].Attempt {
				return ds[i].Attempt < ds[j].Attempt
			}
			return ds[i].RecvStart.Before(ds[j].RecvStart)
		})
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }
