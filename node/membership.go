package node

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ferrymq/ferry/wire"
	"github.com/hashicorp/memberlist"
)

// memberMeta is what each node advertises in memberlist (≤ 512 bytes).
type memberMeta struct {
	ID     string `json:"id"`
	Raft   string `json:"raft"`
	Client string `json:"client"`
	HTTP   string `json:"http"`
	// Formed is set once the node belongs to a meta group with a leader
	// (or had meta state at start): such a node is never re-bootstrapped.
	Formed bool `json:"formed,omitempty"`
}

// leaderTable is the set of raft groups one node leads, as it announced it.
// Gen orders announcements of one node: (process start, counter).
type leaderTable struct {
	Node   string            `json:"node"`
	Start  int64             `json:"start"`
	Seq    uint64            `json:"seq"`
	Groups map[string]uint64 `json:"groups"` // group id -> raft term
}

func (t leaderTable) newerThan(o leaderTable) bool {
	return t.Start > o.Start || (t.Start == o.Start && t.Seq > o.Seq)
}

// membership runs memberlist: who is in the cluster, their addresses, and
// which node leads which raft group (gossiped, so that any node can point a
// client to any partition's leader).
type membership struct {
	n      *Node
	ml     *memberlist.Memberlist
	addr   string // the bound gossip address, fixed at start
	queue  *memberlist.TransmitLimitedQueue
	meta   []byte
	self   memberMeta
	start  int64
	mu     sync.Mutex
	alive  map[string]memberMeta // by node id
	states map[string]wire.NodeState
	tables map[string]leaderTable // by node id
	mine   leaderTable
	events chan struct{}
}

func newMembership(n *Node) (*membership, error) {
	m := &membership{
		n: n, start: time.Now().UnixNano(),
		alive: map[string]memberMeta{}, states: map[string]wire.NodeState{},
		tables: map[string]leaderTable{}, events: make(chan struct{}, 1),
	}
	self := memberMeta{ID: n.cfg.ID, Raft: n.raftAddr, Client: n.clientAddr, HTTP: n.httpAddr, Formed: n.meta.hasState}
	meta, err := json.Marshal(self)
	if err != nil || len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("node metadata of %d bytes: %v", len(meta), err)
	}
	m.meta, m.self = meta, self
	m.mine = leaderTable{Node: n.cfg.ID, Start: m.start, Groups: map[string]uint64{}}
	cfg, err := m.config()
	if err != nil {
		return nil, err
	}
	ml, err := memberlist.Create(cfg)
	if err != nil {
		return nil, fmt.Errorf("start gossip: %w", err)
	}
	m.ml = ml
	ln := ml.LocalNode()
	m.addr = net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
	m.queue = &memberlist.TransmitLimitedQueue{NumNodes: ml.NumMembers, RetransmitMult: 3}
	return m, nil
}

func (m *membership) config() (*memberlist.Config, error) {
	host, portStr, err := net.SplitHostPort(m.n.cfg.GossipAddr)
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(portStr)
	cfg := memberlist.DefaultLANConfig()
	if m.n.cfg.GossipFast {
		cfg = memberlist.DefaultLocalConfig()
		cfg.PushPullInterval = 2 * time.Second
	}
	cfg.Name = m.n.cfg.ID
	cfg.BindAddr, cfg.BindPort = host, port
	cfg.AdvertiseAddr, cfg.AdvertisePort = host, port
	cfg.Label = m.n.cfg.ClusterName
	cfg.Delegate = (*gossipDelegate)(m)
	cfg.Events = (*gossipEvents)(m)
	cfg.Logger = nil
	cfg.LogOutput = slogWriter{m.n.logger.With("logger", "gossip")}
	return cfg, nil
}

// markFormed advertises that this node belongs to a formed meta group.
func (m *membership) markFormed() {
	m.mu.Lock()
	if m.self.Formed {
		m.mu.Unlock()
		return
	}
	m.self.Formed = true
	m.meta, _ = json.Marshal(m.self)
	m.mu.Unlock()
	if err := m.ml.UpdateNode(time.Second); err != nil {
		m.n.logger.Debug("gossip metadata update failed", "err", err)
	}
}

// join contacts the given gossip addresses; it succeeds if any answered.
func (m *membership) join(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	_, err := m.ml.Join(addrs)
	return err
}

// gossipAddr is the actual bound gossip address (port 0 resolved). It is
// read once at start: memberlist rewrites its local node record on every
// metadata update, so reading it later races with those updates.
func (m *membership) gossipAddr() string { return m.addr }

func (m *membership) leave() {
	m.ml.Leave(time.Second)
	m.ml.Shutdown()
}

// members returns the alive members' metadata sorted by id.
func (m *membership) members() []memberMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]memberMeta, 0, len(m.alive))
	for _, mm := range m.alive {
		out = append(out, mm)
	}
	slices.SortFunc(out, func(a, b memberMeta) int { return cmpString(a.ID, b.ID) })
	return out
}

func (m *membership) state(id string) wire.NodeState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.states[id]
}

// announce publishes the groups this node leads when the set changed.
func (m *membership) announce(groups map[string]uint64) {
	m.mu.Lock()
	if maps.Equal(groups, m.mine.Groups) {
		m.mu.Unlock()
		return
	}
	m.mine.Seq++
	m.mine.Groups = groups
	msg, _ := json.Marshal(m.mine)
	m.tables[m.n.cfg.ID] = m.mine
	m.mu.Unlock()
	m.queue.QueueBroadcast(broadcast(msg))
}

// leaderOf returns the node that gossip says leads group (highest term).
func (m *membership) leaderOf(group string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	best, term := "", uint64(0)
	for id, t := range m.tables {
		if _, alive := m.alive[id]; !alive {
			continue
		}
		if tm, ok := t.Groups[group]; ok && (tm > term || (tm == term && id < best)) {
			best, term = id, tm
		}
	}
	return best, best != ""
}

func (m *membership) mergeTable(t leaderTable) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.Node == "" || t.Node == m.n.cfg.ID {
		return
	}
	if old, ok := m.tables[t.Node]; !ok || t.newerThan(old) {
		m.tables[t.Node] = t
	}
}

func (m *membership) notify() {
	select {
	case m.events <- struct{}{}:
	default:
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// broadcast is a memberlist.Broadcast of one leader-table message.
type broadcast []byte

func (b broadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (b broadcast) Message() []byte                       { return b }
func (b broadcast) Finished()                             {}
