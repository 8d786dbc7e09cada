package transport

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Defaults of the node-level liveness probes (SharedConfig.ProbeInterval
// and ProbeTimeout).
const (
	// DefaultProbeInterval is how often a watched peer is probed on its
	// control connection: a few frames a second per peer node, whatever
	// the number of groups.
	DefaultProbeInterval = 200 * time.Millisecond
	// DefaultProbeTimeout is how long a peer may go without answering
	// anything on its connections before it counts as lost. A killed
	// process is noticed sooner: its connection closes. A node busy
	// electing the groups of a dead one can take over a second to answer,
	// and a false loss wakes every quiesced group it leads or follows at
	// once, so the bound leaves room.
	DefaultProbeTimeout = 2500 * time.Millisecond
)

// liveness is one peer's node-level state as seen by the dialing side:
// answered on its connections recently or not. A peer is probed
// only once somebody asked about it (watched), and then for as long as
// the transport runs; peers are bounded by MaxPeers.
type liveness struct {
	mu         sync.Mutex
	watched    bool
	probing    bool // a probe is in flight
	alive      bool
	lastAnswer time.Time
	lost       chan struct{} // closed when alive turns false; nil while not alive
	back       chan struct{} // closed when alive turns true; made on demand while not alive
}

// PeerAlive reports whether the node at addr (resolved through the
// AddressProvider, as RPCs are) answered anything on its connections within
// ProbeTimeout, and a channel closed as soon as that stops being so: the
// connection fails or answers stop. It implements raft.Liveness for the
// groups on this transport, which quiesce on it; the first call about a
// peer starts probing it (reported not alive until the first answer).
func (s *Shared) PeerAlive(id raft.ServerID, addr raft.ServerAddress) (bool, <-chan struct{}) {
	var alive bool
	var lost chan struct{}
	s.watchPeer(id, addr, func(lv *liveness) { alive, lost = lv.alive, lv.lost })
	if !alive {
		return false, nil
	}
	return true, lost
}

// PeerBack returns nil while the node at addr is alive (as PeerAlive
// reports it), and otherwise a channel closed as soon as it answers
// again. It implements raft.Liveness: a leader sends a lost node's
// followers nothing until then. The first call about a peer starts
// probing it.
func (s *Shared) PeerBack(id raft.ServerID, addr raft.ServerAddress) <-chan struct{} {
	var back chan struct{}
	s.watchPeer(id, addr, func(lv *liveness) {
		if !lv.alive {
			if lv.back == nil {
				lv.back = make(chan struct{})
			}
			back = lv.back
		}
	})
	if back == nil {
		return nil // alive, or an address the transport refuses (RPCs fail at once)
	}
	return back
}

// watchPeer resolves addr as RPCs do (through the AddressProvider), marks
// the peer watched, runs read on its liveness under its lock, and starts
// probing a peer watched for the first time. An address the transport
// refuses runs nothing.
func (s *Shared) watchPeer(id raft.ServerID, addr raft.ServerAddress, read func(*liveness)) {
	if ap := s.cfg.AddressProvider; ap != nil {
		if a, err := ap.ServerAddr(id); err == nil && a != "" {
			addr = a
		}
	}
	p, err := s.peer(string(addr))
	if err != nil {
		return
	}
	lv := &p.live
	lv.mu.Lock()
	start := !lv.watched
	lv.watched = true
	read(lv)
	lv.mu.Unlock()
	if start {
		s.probe(p)
	}
}

// answered records an answer from the peer on any of its connections.
func (p *peer) answered(now time.Time) {
	lv := &p.live
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.lastAnswer = now
	if !lv.alive {
		lv.alive = true
		lv.lost = make(chan struct{})
		if lv.back != nil {
			close(lv.back)
			lv.back = nil
		}
	}
}

// lostLiveness marks the peer not alive, closing the channel of those
// watching it.
func (p *peer) lostLiveness() {
	lv := &p.live
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.alive {
		lv.alive = false
		close(lv.lost)
		lv.lost = nil
	}
}

// checkLiveness marks a watched peer lost once its last answer is older
// than ProbeTimeout, and starts its next probe.
func (s *Shared) checkLiveness(p *peer, now time.Time) {
	lv := &p.live
	lv.mu.Lock()
	watched := lv.watched
	late := lv.alive && now.Sub(lv.lastAnswer) > s.cfg.ProbeTimeout
	lv.mu.Unlock()
	if late {
		p.lostLiveness()
	}
	if watched {
		s.probe(p)
	}
}

// probe sends one probe to the peer unless one is in flight. The answer
// (any answer on the control connection) is recorded by the link's
// reader; a failed dial or connection marks the peer lost.
func (s *Shared) probe(p *peer) {
	lv := &p.live
	lv.mu.Lock()
	if lv.probing {
		lv.mu.Unlock()
		return
	}
	lv.probing = true
	lv.mu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			lv.mu.Lock()
			lv.probing = false
			lv.mu.Unlock()
		}()
		l, err := p.link(classControl)
		if err == nil {
			_, err = l.roundTrip(func(id uint64) []byte {
				return finishFrame(beginFrame(kindProbe, id, "", 0))
			})
		}
		if err != nil {
			p.lostLiveness()
		}
	}()
}

// PeerLiveness is one peer's node-level liveness as this transport sees
// it, for diagnostics (Shared.Liveness).
type PeerLiveness struct {
	Addr    string
	Watched bool // probed, because somebody asked about it
	Probing bool // a probe is in flight
	Alive   bool
	// SinceAnswer is how long ago it last answered anything on its
	// connections (zero if never).
	SinceAnswer time.Duration
	// Links counts its open connections; Dialing, the dials in progress.
	Links, Dialing int
}

// Liveness returns every known peer's liveness, sorted by address.
func (s *Shared) Liveness() []PeerLiveness {
	s.mu.Lock()
	peers := make([]*peer, 0, len(s.peers))
	for _, p := range s.peers {
		peers = append(peers, p)
	}
	s.mu.Unlock()
	now := time.Now()
	out := make([]PeerLiveness, 0, len(peers))
	for _, p := range peers {
		pl := PeerLiveness{Addr: p.addr}
		lv := &p.live
		lv.mu.Lock()
		pl.Watched, pl.Probing, pl.Alive = lv.watched, lv.probing, lv.alive
		if !lv.lastAnswer.IsZero() {
			pl.SinceAnswer = now.Sub(lv.lastAnswer)
		}
		lv.mu.Unlock()
		p.mu.Lock()
		for c := range p.links {
			if p.links[c] != nil {
				pl.Links++
			}
			if p.dialing[c] != nil {
				pl.Dialing++
			}
		}
		p.mu.Unlock()
		out = append(out, pl)
	}
	slices.SortFunc(out, func(a, b PeerLiveness) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}
