package fsm

import (
	"errors"
	"slices"
	"strings"
	"time"
)

// model is a deliberately simple reference implementation of the partition
// rules: every message ever accepted sits in one slice in seq order, and
// every question is answered by a linear scan. It shares no code with the
// FSM except the jitter hash, which is part of the specification.
type model struct {
	cfg      QueueConfig
	clock    int64
	lastSeq  uint64
	msgs     []*modelMsg
	dedup    []modelDedup
	counters Counters
	pause    PauseState
	rateTAT  int64 // the delivery rate schedule, as rate.go keeps it
	guard    int   // leases of the top priority in a row while a lower one waited
	// Fair delivery (fair.go): the lane clock, the ungrouped lane's stamp
	// and each group's, stamped at its creation and deliveries while fair.
	laneClock, plainTick uint64
	served               map[string]uint64
	// schedules by name (schedule_model_test.go)
	schedules map[string]*modelSchedule
}

type modelMsg struct {
	seq       uint64
	id, group string
	headers   map[string]string
	body      []byte
	enq       int64
	visibleAt int64
	attempts  uint32
	state     msgState // 0 = gone (acked, purged, deleted, expired, redriven)
	reason    DeadReason
	text      string // the reason text of the dead letter
	deadAt    int64
	consumer  string
	history   int
	priority  uint8
}

type modelDedup struct {
	id  string
	seq uint64
	at  int64
}

func (md *model) live(m *modelMsg) bool {
	return m.state == stateReady || m.state == stateDelayed || m.state == stateInFlight
}

func (md *model) stored(m *modelMsg) int64 {
	n := 2 + len(m.body)
	for k, v := range m.headers {
		n += 6 + len(k) + len(v)
	}
	return int64(n)
}

// groupHead returns the oldest live message of the group.
func (md *model) groupHead(group string) *modelMsg {
	for _, m := range md.msgs {
		if md.live(m) && m.group == group {
			return m
		}
	}
	return nil
}

func (md *model) eligible(m *modelMsg) bool {
	return m.state == stateReady && (m.group == "" || md.groupHead(m.group) == m)
}

func (md *model) find(seq uint64) *modelMsg {
	for _, m := range md.msgs {
		if m.seq == seq {
			return m
		}
	}
	return nil
}

func (md *model) backoff(m *modelMsg) time.Duration {
	if md.cfg.BackoffBase <= 0 {
		return 0
	}
	d := md.cfg.BackoffBase
	for i := uint32(1); i < m.attempts; i++ {
		if d >= md.cfg.BackoffMax {
			break
		}
		d *= 2
	}
	d = min(d, md.cfg.BackoffMax)
	// The jitter only lengthens the delay: [d, min(max, d + d/4)].
	top := max(d, min(md.cfg.BackoffMax, d+d/4))
	return d + time.Duration(jitterHash(m.id, m.attempts)%uint64(top-d+1))
}

func (md *model) exhausted(m *modelMsg) bool {
	return md.cfg.MaxReceives > 0 && int(m.attempts) >= md.cfg.MaxReceives
}

func (md *model) kill(m *modelMsg, r DeadReason, text string) {
	m.state, m.reason, m.deadAt, m.text = stateDead, r, md.clock, text
	md.counters.DeadLettered++
	md.trimDead()
}

// oldestDead returns the dead letter with the earliest (deadAt, seq).
func (md *model) oldestDead() *modelMsg {
	var out *modelMsg
	for _, m := range md.msgs {
		if m.state == stateDead && (out == nil || m.deadAt < out.deadAt) {
			out = m
		}
	}
	return out
}

// trimDead drops the oldest dead letters while the caps are exceeded.
func (md *model) trimDead() {
	for {
		var n, bytes int64
		for _, m := range md.msgs {
			if m.state == stateDead {
				n++
				bytes += md.stored(m)
			}
		}
		if !(md.cfg.MaxDead > 0 && n > md.cfg.MaxDead) && !(md.cfg.MaxDeadBytes > 0 && bytes > md.cfg.MaxDeadBytes) {
			return
		}
		md.oldestDead().state = 0
		md.counters.DeadEvicted++
	}
}

func (md *model) retry(m *modelMsg, at int64) {
	m.visibleAt = at
	m.state = stateDelayed
	if at <= md.clock {
		m.state = stateReady
	}
}

// step moves time to at and fires everything due, one timer at a time in
// (time, seq) order.
func (md *model) step(at int64) int {
	md.clock = max(md.clock, at)
	expired := 0
	for {
		var due *modelMsg
		for _, m := range md.msgs {
			if (m.state == stateDelayed || m.state == stateInFlight) && m.visibleAt <= md.clock &&
				(due == nil || m.visibleAt < due.visibleAt) {
				due = m
			}
		}
		if due == nil {
			break
		}
		if due.state == stateDelayed {
			due.state = stateReady
			continue
		}
		expired++
		md.counters.Expired++
		due.history++
		if md.exhausted(due) {
			md.kill(due, DeadLeaseExpired, "lease expired")
		} else {
			md.retry(due, md.clock+int64(md.backoff(due)))
		}
	}
	kept := md.dedup[:0]
	for _, d := range md.dedup {
		if d.at+int64(md.cfg.DedupWindow) > md.clock {
			kept = append(kept, d)
		}
	}
	md.dedup = kept
	if md.cfg.Retention > 0 {
		for _, m := range md.msgs {
			if md.live(m) && m.enq+int64(md.cfg.Retention) <= md.clock && m.state != stateInFlight {
				m.state = 0
				md.counters.RetentionExpired++
			}
		}
	}
	if md.cfg.DeadRetention > 0 {
		for _, m := range md.msgs {
			if m.state == stateDead && m.deadAt+int64(md.cfg.DeadRetention) <= md.clock {
				m.state = 0
				md.counters.DeadExpired++
			}
		}
	}
	return expired
}

func (md *model) send(nm NewMessage) SendOutcome {
	f := FSM{cfg: md.cfg}
	if err := f.validateNew(&nm); err != nil {
		return SendOutcome{Err: err}
	}
	for _, d := range md.dedup {
		if d.id == nm.ID {
			md.counters.Duplicates++
			return SendOutcome{Seq: d.seq, Duplicate: true}
		}
	}
	m := &modelMsg{id: nm.ID, group: nm.Group, headers: nm.Headers, body: nm.Body, enq: md.clock, priority: nm.Priority}
	var depth, bytes int64
	for _, o := range md.msgs {
		if md.live(o) {
			depth++
			bytes += md.stored(o)
		}
	}
	if (md.cfg.MaxDepth > 0 && depth+1 > md.cfg.MaxDepth) || (md.cfg.MaxBytes > 0 && bytes+md.stored(m) > md.cfg.MaxBytes) {
		return SendOutcome{Err: ErrQueueFull}
	}
	md.lastSeq++
	m.seq = md.lastSeq
	md.joinGroup(m.group)
	md.msgs = append(md.msgs, m)
	md.retry(m, md.clock+int64(nm.Delay))
	if md.cfg.DedupWindow > 0 {
		for md.cfg.DedupMaxIDs > 0 && int64(len(md.dedup)) >= md.cfg.DedupMaxIDs {
			md.dedup = md.dedup[1:]
			md.counters.DedupEvicted++
		}
		md.dedup = append(md.dedup, modelDedup{nm.ID, m.seq, md.clock})
	}
	md.counters.Sent++
	return SendOutcome{Seq: m.seq}
}

func (md *model) receive(c ReceiveCmd) []Delivery {
	if md.pause.Paused {
		return nil
	}
	vis := c.Visibility
	if vis == 0 {
		vis = md.cfg.VisibilityTimeout
	}
	most := c.Max
	if limit := md.cfg.MaxInFlight; limit > 0 {
		var leased int64
		for _, m := range md.msgs {
			if m.state == stateInFlight {
				leased++
			}
		}
		most = int(min(int64(most), max(0, limit-leased)))
	}
	var spacing int64
	if r := md.cfg.MaxDeliveryRate; r > 0 {
		spacing = max(1, int64(time.Second)/r)
		room := (md.clock + int64(time.Second) - max(md.rateTAT, md.clock)) / spacing
		most = int(min(int64(most), max(0, room)))
	}
	var out []Delivery
	defer func() {
		if spacing > 0 && len(out) > 0 {
			md.rateTAT = max(md.rateTAT, md.clock) + int64(len(out))*spacing
		}
	}()
	for len(out) < most {
		next := md.nextEligible()
		if next == nil {
			break
		}
		if md.exhausted(next) {
			md.kill(next, DeadRetriesExhausted, "receive limit reached")
			continue
		}
		next.attempts++
		next.state, next.visibleAt, next.consumer = stateInFlight, md.clock+int64(vis), c.Consumer
		md.counters.Leased++
		out = append(out, Delivery{
			Receipt: Receipt{Seq: next.seq, Attempt: next.attempts}, ID: next.id, Group: next.group,
			Headers: next.headers, Body: next.body, EnqueuedAt: next.enq, Deadline: next.visibleAt,
			Priority: next.priority,
		})
	}
	return out
}

// nextEligible picks the message a receive takes next, by the rules of
// priority.go stated plainly: the oldest eligible message of the highest
// priority, except that after GuardEvery-1 such picks in a row while an
// eligible message of a lower priority waited, the oldest of those lower
// ones. It moves the guard.
func (md *model) nextEligible() *modelMsg {
	var top, low *modelMsg
	for _, m := range md.msgs {
		if md.eligible(m) && (top == nil || m.priority > top.priority) {
			top = m
		}
	}
	if top == nil {
		return nil
	}
	for _, m := range md.msgs {
		if md.eligible(m) && m.priority < top.priority {
			low = m
			break
		}
	}
	if md.cfg.FairGroups != 0 {
		top = md.fairPick(top.priority)
	}
	switch {
	case low == nil:
		md.guard = 0
	case md.guard == GuardEvery-1:
		md.guard = 0
		md.stamp(low)
		return low
	default:
		md.guard++
	}
	md.stamp(top)
	return top
}

// joinGroup stamps a group about to be created while delivery is fair;
// one created while it is not starts unstamped.
func (md *model) joinGroup(group string) {
	if group == "" || md.groupHead(group) != nil {
		return
	}
	if md.cfg.FairGroups == 0 {
		delete(md.served, group)
		return
	}
	md.laneClock++
	if md.served == nil {
		md.served = map[string]uint64{}
	}
	md.served[group] = md.laneClock
}

// stamp records a delivery from m's lane, while delivery is fair.
func (md *model) stamp(m *modelMsg) {
	if md.cfg.FairGroups == 0 {
		return
	}
	md.laneClock++
	if m.group == "" {
		md.plainTick = md.laneClock
		return
	}
	if md.served == nil {
		md.served = map[string]uint64{}
	}
	md.served[m.group] = md.laneClock
}

// fairPick is fair delivery stated plainly: of the eligible messages of
// priority p, the one whose lane has the least stamp, the ungrouped lane
// first on a tie, then the oldest.
func (md *model) fairPick(p uint8) *modelMsg {
	var best *modelMsg
	key := func(m *modelMsg) (uint64, int) {
		if m.group == "" {
			return md.plainTick, 0
		}
		return md.served[m.group], 1
	}
	for _, m := range md.msgs {
		if !md.eligible(m) || m.priority != p {
			continue
		}
		if best == nil {
			best = m
			continue
		}
		ms, mg := key(m)
		bs, bg := key(best)
		if ms < bs || ms == bs && mg < bg {
			best = m
		}
	}
	return best
}

// leased implements the fencing rule for extend, nack and reject.
func (md *model) leased(r Receipt) (*modelMsg, error) {
	m := md.find(r.Seq)
	switch {
	case m == nil || m.state == 0:
		return nil, ErrNotFound
	case m.state != stateInFlight || m.attempts != r.Attempt:
		return nil, ErrLeaseLost
	}
	return m, nil
}

func (md *model) ack(r Receipt) error {
	m := md.find(r.Seq)
	switch {
	case m == nil || m.state == 0:
		return ErrNotFound
	case m.attempts != r.Attempt || r.Attempt == 0:
		return ErrLeaseLost
	case m.state == stateDead && m.reason != DeadLeaseExpired:
		return ErrLeaseLost
	}
	m.state = 0
	md.counters.Acked++
	return nil
}

func (md *model) extend(it ExtendItem) error {
	if it.Visibility <= 0 || it.Visibility > VisibilityTimeoutMax {
		return ErrInvalidArgument
	}
	m, err := md.leased(it.Receipt)
	if err == nil {
		m.visibleAt = md.clock + int64(it.Visibility)
	}
	return err
}

func (md *model) nack(it NackItem) error {
	if it.ExplicitDelay && (it.Delay < 0 || it.Delay > DelayMax) {
		return ErrInvalidArgument
	}
	if it.Release && it.ExplicitDelay {
		return ErrInvalidArgument
	}
	m, err := md.leased(it.Receipt)
	if err != nil {
		return err
	}
	if it.Release {
		// A released delivery does not count: ready at once, attempt
		// taken back.
		m.attempts--
		md.retry(m, md.clock)
		return nil
	}
	md.counters.Nacked++
	m.history++
	if md.exhausted(m) {
		md.kill(m, DeadRetriesExhausted, it.Reason)
		return nil
	}
	delay := md.backoff(m)
	if it.ExplicitDelay {
		delay = it.Delay
	}
	md.retry(m, md.clock+int64(delay))
	return nil
}

func (md *model) reject(it RejectItem) error {
	m, err := md.leased(it.Receipt)
	if err != nil {
		return err
	}
	md.counters.Rejected++
	m.history++
	md.kill(m, DeadRejected, it.Reason)
	return nil
}

func (md *model) deadMatching(d DeadFilter) []*modelMsg {
	var out []*modelMsg
	limit := d.Limit
	if limit == 0 {
		limit = DeadListMax
	}
	for _, m := range md.msgs {
		if m.state != stateDead || m.seq <= d.AfterSeq || len(out) >= limit {
			continue
		}
		if (len(d.Seqs) > 0 && !slices.Contains(d.Seqs, m.seq)) || (d.Reason != 0 && m.reason != d.Reason) ||
			(d.Group != "" && m.group != d.Group) || (d.FromAt != 0 && m.deadAt < d.FromAt) || (d.ToAt != 0 && m.deadAt >= d.ToAt) ||
			(d.Text != "" && !strings.Contains(m.text, d.Text)) {
			continue
		}
		out = append(out, m)
	}
	return out
}

func (md *model) redrive(d DeadFilter) int {
	picked := md.deadMatching(d)
	for _, old := range picked {
		old.state = 0
		md.lastSeq++
		m := &modelMsg{seq: md.lastSeq, id: old.id, group: old.group, headers: old.headers, body: old.body,
			enq: md.clock, state: stateReady, visibleAt: md.clock, consumer: old.consumer, history: old.history + 1,
			priority: old.priority}
		md.joinGroup(m.group)
		md.msgs = append(md.msgs, m)
		for i := range md.dedup {
			if md.dedup[i].id == old.id && md.dedup[i].seq == old.seq {
				md.dedup[i].seq = m.seq
			}
		}
		md.counters.Redriven++
	}
	return len(picked)
}

func (md *model) deleteDead(d DeadFilter) int {
	picked := md.deadMatching(d)
	for _, m := range picked {
		m.state = 0
		md.counters.DeadDeleted++
	}
	return len(picked)
}

func (md *model) purge() int {
	n := 0
	for _, m := range md.msgs {
		if m.state == stateReady || m.state == stateDelayed {
			m.state = 0
			n++
		}
	}
	md.counters.Purged += uint64(n)
	return n
}

// deleteMessage is CmdDeleteMessage on the model.
func (md *model) deleteMessage(c DeleteMessageCmd) error {
	if c.Seq == 0 || c.ID == "" {
		return ErrInvalidArgument
	}
	m := md.find(c.Seq)
	if m == nil || m.state == 0 || m.id != c.ID {
		return ErrNotFound
	}
	switch {
	case m.state == stateDead && c.Undelivered:
		return ErrNotFound
	case m.state == stateDead:
		md.counters.DeadDeleted++
	case c.Undelivered && (m.attempts > 0 || m.state == stateInFlight):
		return ErrNotFound
	default:
		md.counters.Purged++
	}
	m.state = 0
	return nil
}

// errKind maps an error to the sentinel it wraps, for comparing answers.
func errKind(err error) error {
	for _, s := range []error{ErrInvalidArgument, ErrInvalidConfig, ErrMessageTooLarge, ErrQueueFull, ErrLeaseLost, ErrNotFound} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}
