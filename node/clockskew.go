package node

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ferrymq/ferry/internal/clock"
	"github.com/hashicorp/memberlist"
)

// DefaultMaxClockOffset is how far this node's clock may be from the
// majority of the cluster's before it gives up leadership.
const DefaultMaxClockOffset = 500 * time.Millisecond

// Clock measurement parameters.
const (
	clockPayloadVersion = 1
	clockPayloadBytes   = 9                // version, then clock.Now in Unix nanoseconds
	clockSamplesKept    = 4                // per peer; the latest counts
	clockSampleMaxAge   = 30 * time.Second // older samples are ignored
	clockCheckEvery     = 500 * time.Millisecond
	clockLogEvery       = 30 * time.Second
)

// clockSample is one measurement of a peer's clock: its offset from ours
// (peer minus this node), the round trip it was measured over (the error is
// at most half of it), and when it was taken (monotonic time).
type clockSample struct {
	offset, rtt time.Duration
	at          time.Time
}

// clockState is the latest judgement of this node's clock.
type clockState struct {
	// offset is this node's clock minus the majority's (the median of the
	// offsets measured, this node's own counting as zero).
	offset time.Duration
	// known is set when enough peers were measured to judge (at least half
	// of the other members); exceeded when |offset| > the bound.
	known, exceeded bool
	peers           int
}

// clockMonitor measures the other nodes' clocks on gossip pings (each ack
// carries the acking node's clock) and judges whether this node's clock is
// within Config.MaxClockOffset of the majority's. A node outside it hands
// over the leadership of every group it leads, refuses new commands, and
// says so in its log, its metrics and /readyz.
type clockMonitor struct {
	self      string // this node's id
	maxOffset time.Duration
	logger    *slog.Logger
	node      clockNode

	mu        sync.Mutex
	samples   map[string][]clockSample
	state     clockState
	loggedAt  time.Time
	transfers uint64
}

// clockNode is what the clock monitor needs of the node it watches over.
type clockNode interface {
	// liveMembers counts the cluster's live members, this node included.
	liveMembers() int
	// handOverForClock hands over the leadership of every group this node
	// leads and returns how many it tried to hand over.
	handOverForClock() uint64
}

// newClockMonitor returns a monitor of node self's clock with no samples,
// judging against maxOffset (Config.MaxClockOffset).
func newClockMonitor(self string, maxOffset time.Duration, logger *slog.Logger, node clockNode) *clockMonitor {
	return &clockMonitor{self: self, maxOffset: maxOffset, logger: logger, node: node, samples: map[string][]clockSample{}}
}

// clockPing is the memberlist.PingDelegate of the monitor.
type clockPing clockMonitor

// AckPayload carries this node's clock in every ack it sends.
func (p *clockPing) AckPayload() []byte {
	b := make([]byte, clockPayloadBytes)
	b[0] = clockPayloadVersion
	binary.BigEndian.PutUint64(b[1:], uint64(clock.Now().UnixNano()))
	return b
}

// NotifyPingComplete records the offset of the acking node's clock,
// assuming the ack was stamped halfway through the round trip.
func (p *clockPing) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	if len(payload) != clockPayloadBytes || payload[0] != clockPayloadVersion || other == nil || rtt < 0 {
		return
	}
	remote := int64(binary.BigEndian.Uint64(payload[1:]))
	mid := clock.Now().Add(-rtt / 2).UnixNano()
	(*clockMonitor)(p).record(other.Name, clockSample{offset: time.Duration(remote - mid), rtt: rtt, at: time.Now()})
}

// record keeps a sample of peer's clock, the newest clockSamplesKept per
// peer.
func (m *clockMonitor) record(peer string, s clockSample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ss := append(m.samples[peer], s)
	if len(ss) > clockSamplesKept {
		ss = ss[len(ss)-clockSamplesKept:]
	}
	m.samples[peer] = ss
}

// judge computes this node's offset from the majority, from each peer's
// latest sample taken after since. members is the number of live cluster
// members, this node included.
func (m *clockMonitor) judge(since time.Time, members int) clockState {
	offsets := m.offsetsSince(since)
	st := clockState{peers: len(offsets) - 1}
	if st.peers == 0 || st.peers < members/2 {
		return st
	}
	slices.Sort(offsets)
	// The median; with an even count, the middle value nearer to zero, so
	// that a node cannot be judged wrong when the measurements are split.
	med := offsets[len(offsets)/2]
	if len(offsets)%2 == 0 {
		if lo := offsets[len(offsets)/2-1]; abs(lo) < abs(med) {
			med = lo
		}
	}
	st.known, st.offset = true, -med
	st.exceeded = m.maxOffset > 0 && abs(med) > m.maxOffset
	return st
}

// offsetsSince returns this node's own offset (zero) and each peer's from
// its latest sample taken after since, less its error (half the round
// trip), so that a slow network or a loaded node is not taken for a clock
// off. The latest, not the one over the shortest round trip: after a jump,
// only new samples tell.
func (m *clockMonitor) offsetsSince(since time.Time) []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	offsets := []time.Duration{0}
	for peer, ss := range m.samples {
		last := ss[0]
		for _, s := range ss[1:] {
			if s.at.After(last.at) {
				last = s
			}
		}
		if last.at.After(since) && peer != m.self {
			offsets = append(offsets, towardZero(last.offset, last.rtt/2))
		}
	}
	return offsets
}

// towardZero moves d toward zero by at most by.
func towardZero(d, by time.Duration) time.Duration {
	switch {
	case d > by:
		return d - by
	case d < -by:
		return d + by
	}
	return 0
}

// abs returns the magnitude of d.
func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// verified reports whether this node's clock was checked after since and
// a strict majority of the cluster's members (this node included) agree
// with it within the bound (partition.Config.ClockVerified). Stricter than
// judge: a split measurement does not verify.
func (m *clockMonitor) verified(since time.Time) bool {
	return m.agreeing(since) > m.node.liveMembers()/2
}

// agreeing counts the nodes, this one included, whose clocks measured after
// since are within the bound of this node's.
func (m *clockMonitor) agreeing(since time.Time) int {
	agree := 0
	for _, off := range m.offsetsSince(since) {
		if abs(off) <= m.maxOffset {
			agree++
		}
	}
	return agree
}

// healthy reports whether the latest judgement lets this node lead: not
// known to be outside the bound.
func (m *clockMonitor) healthy() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.state.exceeded
}

// current returns the latest judgement and the leadership transfers made.
func (m *clockMonitor) current() (clockState, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state, m.transfers
}

// problem describes why the node's clock disqualifies it, or "".
func (m *clockMonitor) problem() string {
	st, _ := m.current()
	if !st.exceeded {
		return ""
	}
	return fmt.Sprintf("clock offset %v from the majority of nodes exceeds -max-clock-offset %v; this node gives up leadership and refuses commands",
		st.offset.Round(time.Millisecond), m.maxOffset)
}

// run judges the clock every clockCheckEvery until closing is closed and,
// while it is outside the bound, hands over leadership of every group this
// node leads.
func (m *clockMonitor) run(closing <-chan struct{}) {
	t := time.NewTicker(clockCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-closing:
			return
		case <-t.C:
		}
		st := m.judge(time.Now().Add(-clockSampleMaxAge), m.node.liveMembers())
		m.mu.Lock()
		was := m.state.exceeded
		m.state = st
		logNow := st.exceeded && (!was || time.Since(m.loggedAt) >= clockLogEvery)
		if logNow {
			m.loggedAt = time.Now()
		}
		m.mu.Unlock()
		switch {
		case logNow:
			m.logger.Error("clock offset from the majority of nodes beyond the bound: giving up leadership, refusing commands",
				"offset", st.offset, "max_clock_offset", m.maxOffset, "peers_measured", st.peers)
		case was && !st.exceeded:
			m.logger.Info("clock back within the bound of the majority of nodes", "offset", st.offset, "known", st.known)
		}
		if st.exceeded {
			n := m.node.handOverForClock()
			m.mu.Lock()
			m.transfers += n
			m.mu.Unlock()
		}
	}
}

// liveMembers implements clockNode: the members gossip sees alive.
func (n *Node) liveMembers() int { return n.members.ml.NumMembers() }

// handOverForClock implements clockNode: it hands over every partition and
// the meta group this node leads.
func (n *Node) handOverForClock() uint64 {
	var count uint64
	for _, r := range n.replicas.all() {
		if r.p.IsLeader() {
			if err := r.p.GiveUpLeadership(); err != nil {
				n.logger.Warn("leadership hand-over for clock offset failed", "group", r.a.GroupID, "err", err)
			}
			count++
		}
	}
	if n.meta.isLeader() {
		if err := n.meta.raft.LeadershipTransfer().Error(); err != nil {
			n.logger.Warn("meta leadership hand-over for clock offset failed", "err", err)
		}
		count++
	}
	return count
}
