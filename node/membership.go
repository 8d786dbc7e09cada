package node

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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
	// SignKey is the ed25519 public key (base64) that signs this node's
	// leader tables; a fresh one per process.
	SignKey string `json:"sign,omitempty"`
	// Inc is the node's incarnation (incarnation.go), hex; empty from a
	// node that predates incarnations.
	Inc string `json:"inc,omitempty"`
	// Proof is the admission proof: an HMAC of the fields above under the
	// cluster secret (see admissionProof). Empty on an insecure node.
	Proof string `json:"proof,omitempty"`
}

// leaderTable is the set of raft groups one node leads, as it announced it.
// Start and Seq order the announcements of one node: (process start,
// counter).
type leaderTable struct {
	Node   string            `json:"node"`
	Start  int64             `json:"start"`
	Seq    uint64            `json:"seq"`
	Groups map[string]uint64 `json:"groups"` // group id -> raft term
	// Reports are what the node's partition leaders ask the catalog to
	// record (moves.go); at most reportsMax.
	Reports []moveReport `json:"reports,omitempty"`
	// Behind lists the nodes (sorted) holding a replica, in a group this
	// node leads, that trails the commit index by more than behindSlack
	// entries: a restarted or slow follower catching up. Nodes, not
	// groups: the list stays short and steady (a dead node is in it for
	// as long as it is dead), so it costs gossip nothing while it holds.
	Behind []string `json:"behind,omitempty"`
	// Opening is set until the node has opened every replica the catalog
	// assigns it, after a start.
	Opening bool `json:"opening,omitempty"`
}

// sameContent reports whether t and o announce the same thing.
func (t leaderTable) sameContent(o leaderTable) bool {
	return maps.Equal(t.Groups, o.Groups) && slices.Equal(t.Reports, o.Reports) && slices.Equal(t.Behind, o.Behind) &&
		t.Opening == o.Opening
}

// newerThan reports whether t was announced after o by the same node: a
// later process start, or a later announcement of the same process.
func (t leaderTable) newerThan(o leaderTable) bool {
	return t.Start > o.Start || (t.Start == o.Start && t.Seq > o.Seq)
}

// membership runs memberlist: who is in the cluster, their addresses, and
// which node leads which raft group (gossiped, so that any node can point a
// client to any partition's leader).
type membership struct {
	cfg    *Config
	logger *slog.Logger
	clock  *clockMonitor // answers gossip's pings with this node's clock
	ml     *memberlist.Memberlist
	addr   string // the bound gossip address, fixed at start
	queue  *memberlist.TransmitLimitedQueue
	meta   []byte
	self   memberMeta
	start  int64
	mu     sync.Mutex
	alive  map[string]memberMeta // by node id
	states map[string]wire.NodeState
	// since is when each member's state began (this node's view).
	since  map[string]time.Time
	tables map[string]signedTable // verified tables, by node id
	// decoded holds each of tables decoded: leaderOf runs for every
	// not-leader answer and create, and decoding thousands of groups'
	// JSON each time cost more than the lookups.
	decoded map[string]leaderTable
	mine    leaderTable
	sent    time.Time // when mine was last queued for broadcast
	events  chan struct{}
	// changes counts the member updates gossip delivered (reconcile
	// passes look again when it moved).
	changes atomic.Uint64
	ring    *memberlist.Keyring // nil on an insecure node
	// refused is when each unadmitted member was last warned about.
	refused map[string]time.Time
	// signKey signs this node's leader tables.
	signKey ed25519.PrivateKey
}

// newMembership starts gossip for the node of cfg: a fresh key to sign its
// leader tables, the keyring from Config.GossipKeys (first key primary),
// and self, this node's metadata with its addresses and incarnation (the
// signing key is filled in here). It joins no one yet.
func newMembership(cfg *Config, logger *slog.Logger, clock *clockMonitor, self memberMeta) (*membership, error) {
	m := &membership{
		cfg: cfg, logger: logger, clock: clock, start: time.Now().UnixNano(),
		alive: map[string]memberMeta{}, states: map[string]wire.NodeState{}, since: map[string]time.Time{},
		tables: map[string]signedTable{}, decoded: map[string]leaderTable{}, events: make(chan struct{}, 1), refused: map[string]time.Time{},
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("leader table signing key: %w", err)
	}
	m.signKey = priv
	if len(cfg.GossipKeys) > 0 {
		if m.ring, err = memberlist.NewKeyring(cfg.GossipKeys[1:], cfg.GossipKeys[0]); err != nil {
			return nil, fmt.Errorf("gossip keyring: %w", err)
		}
	}
	self.SignKey = base64.StdEncoding.EncodeToString(pub)
	if err := m.setSelf(self); err != nil {
		return nil, err
	}
	m.mine = leaderTable{Node: cfg.ID, Start: m.start, Groups: map[string]uint64{}}
	mlc, err := m.config()
	if err != nil {
		return nil, err
	}
	ml, err := memberlist.Create(mlc)
	if err != nil {
		return nil, fmt.Errorf("start gossip: %w", err)
	}
	m.ml = ml
	ln := ml.LocalNode()
	m.addr = net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
	m.queue = &memberlist.TransmitLimitedQueue{NumNodes: ml.NumMembers, RetransmitMult: 3}
	return m, nil
}

// config builds the memberlist configuration: LAN timings (local ones
// under GossipFast), bound to and advertising GossipAddr, the cluster name
// as label, the keyring (when set) with encryption required both ways, the
// gossip, event and clock delegates, and logs through slog.
func (m *membership) config() (*memberlist.Config, error) {
	host, portStr, err := net.SplitHostPort(m.cfg.GossipAddr)
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(portStr)
	cfg := memberlist.DefaultLANConfig()
	if m.cfg.GossipFast {
		cfg = memberlist.DefaultLocalConfig()
		cfg.PushPullInterval = 2 * time.Second
	}
	cfg.Name = m.cfg.ID
	cfg.BindAddr, cfg.BindPort = host, port
	cfg.AdvertiseAddr, cfg.AdvertisePort = host, port
	cfg.Label = m.cfg.ClusterName
	if m.ring != nil {
		// Every packet and stream is encrypted with the primary key, and
		// anything not encrypted with a key of the ring is dropped.
		cfg.Keyring = m.ring
		cfg.GossipVerifyIncoming, cfg.GossipVerifyOutgoing = true, true
	}
	cfg.Delegate = (*gossipDelegate)(m)
	cfg.Events = (*gossipEvents)(m)
	cfg.Ping = (*clockPing)(m.clock)
	cfg.Logger = nil
	cfg.LogOutput = slogWriter{m.logger.With("logger", "gossip")}
	return cfg, nil
}

// markFormed advertises that this node belongs to a formed meta group.
func (m *membership) markFormed() {
	m.mu.Lock()
	if m.self.Formed {
		m.mu.Unlock()
		return
	}
	self := m.self
	self.Formed = true
	m.mu.Unlock()
	if err := m.setSelf(self); err != nil {
		m.logger.Error("gossip metadata", "err", err)
		return
	}
	if err := m.ml.UpdateNode(time.Second); err != nil {
		m.logger.Debug("gossip metadata update failed", "err", err)
	}
}

// setSelf signs and stores the metadata this node advertises: the
// admission proof is made under the primary gossip key.
func (m *membership) setSelf(self memberMeta) error {
	self.Proof = ""
	if keys := m.keyring(); len(keys) > 0 {
		self.Proof = admissionProof(clusterSecret(keys[0]), self)
	}
	if m.cfg.forgeProof != nil {
		self.Proof = m.cfg.forgeProof(self)
	}
	meta, err := json.Marshal(self)
	if err != nil || len(meta) > memberlist.MetaMaxSize {
		return fmt.Errorf("node metadata of %d bytes: %v", len(meta), err)
	}
	m.mu.Lock()
	m.meta, m.self = meta, self
	m.mu.Unlock()
	return nil
}

// setKeys replaces the gossip keyring with keys (primary first), in the
// order that keeps the cluster talking during a rotation: install the new
// keys, switch the primary, remove the keys no longer listed. The
// admission proof is then made again under the new primary key.
func (m *membership) setKeys(keys [][]byte) error {
	if m.ring == nil {
		return fmt.Errorf("%w: gossip encryption is off on this node; it needs a restart with a key", ErrInvalidConfig)
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: a keyring needs at least one key", ErrInvalidConfig)
	}
	if err := checkGossipKeys(keys); err != nil {
		return err
	}
	for _, k := range keys {
		if err := m.ring.AddKey(k); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if err := m.ring.UseKey(keys[0]); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	for _, old := range slices.Clone(m.ring.GetKeys()) {
		if !slices.ContainsFunc(keys, func(k []byte) bool { return string(k) == string(old) }) {
			if err := m.ring.RemoveKey(old); err != nil {
				return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
			}
		}
	}
	m.mu.Lock()
	self := m.self
	m.mu.Unlock()
	if err := m.setSelf(self); err != nil {
		return err
	}
	// Gossip the new proof. UpdateNode waits for the broadcast to go out
	// (a timeout of 0 would wait forever, and a broadcast superseded by a
	// later update never reports); it is queued either way.
	if err := m.ml.UpdateNode(time.Second); err != nil {
		m.logger.Debug("gossip metadata update not confirmed yet", "err", err)
	}
	return nil
}

// join contacts the given gossip addresses; it succeeds if any answered.
func (m *membership) join(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	_, err := m.ml.Join(addrs)
	return err
}

// count returns how many members gossip sees alive, this node included.
func (m *membership) count() int { return m.ml.NumMembers() }

// gossipAddr is the actual bound gossip address (port 0 resolved). It is
// read once at start: memberlist rewrites its local node record on every
// metadata update, so reading it later races with those updates.
func (m *membership) gossipAddr() string { return m.addr }

// leave announces this node's departure (waiting up to a second) and
// stops gossip.
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

// state returns a member's last gossip state as this node saw it; the
// zero state for a member never seen.
func (m *membership) state(id string) wire.NodeState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.states[id]
}

// announce publishes the groups this node leads (with its move reports,
// the groups it leads that have a replica behind, and whether it is still
// opening replicas) when any of it changed, and again every
// leaderTableRefresh. The table goes out signed with this node's key.
func (m *membership) announce(t leaderTable) {
	m.mu.Lock()
	if t.sameContent(m.mine) && time.Since(m.sent) < leaderTableRefresh {
		m.mu.Unlock()
		return
	}
	m.mine.Seq++
	m.mine.Groups, m.mine.Reports, m.mine.Behind, m.mine.Opening = t.Groups, t.Reports, t.Behind, t.Opening
	st := m.sign(m.mine)
	m.tables[m.cfg.ID], m.decoded[m.cfg.ID] = st, m.mine
	m.sent = time.Now()
	m.mu.Unlock()
	msg, _ := json.Marshal(st)
	m.queue.QueueBroadcast(broadcast(msg))
}

// leaderOf returns the node that gossip says leads group (highest term).
func (m *membership) leaderOf(group string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	best, term := "", uint64(0)
	for id, t := range m.decoded {
		if _, alive := m.alive[id]; !alive && id != m.cfg.ID {
			continue
		}
		if tm, ok := t.Groups[group]; ok && (tm > term || (tm == term && id < best)) {
			best, term = id, tm
		}
	}
	return best, best != ""
}

// errStaleTable reports a table no newer than the one held.
var errStaleTable = errors.New("leader table not newer than the one held")

// mergeTable keeps a gossiped table if it verifies (see verifyTable) and
// is newer than the one held for its node.
func (m *membership) mergeTable(st signedTable) error {
	t, err := m.verifyTable(st, time.Now())
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.decoded[t.Node]; ok && !t.newerThan(old) {
		return errStaleTable
	}
	m.tables[t.Node], m.decoded[t.Node] = st, t
	return nil
}

// notify wakes the one waiter on events without blocking; a wake-up
// already pending covers this one.
func (m *membership) notify() {
	select {
	case m.events <- struct{}{}:
	default:
	}
}

// cmpString orders two strings as slices.SortFunc wants.
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

// Invalidates implements memberlist.Broadcast: a leader table never
// replaces another in the queue (receivers keep the newest).
func (b broadcast) Invalidates(memberlist.Broadcast) bool { return false }

// Message implements memberlist.Broadcast.
func (b broadcast) Message() []byte { return b }

// Finished implements memberlist.Broadcast.
func (b broadcast) Finished() {}

// incarnation returns the member's incarnation, 0 when it sent none or one
// that does not parse.
func (m memberMeta) incarnation() uint64 {
	inc, err := strconv.ParseUint(m.Inc, 16, 64)
	if err != nil {
		return 0
	}
	return inc
}

// deadFor returns how long gossip has seen member id dead or gone: zero
// when it is alive or suspect, and since this node's gossip started when
// gossip never saw it (a meta leader that started after the node died
// must still see it dead; memberlist forgets dead members after a while).
func (m *membership) deadFor(id string) time.Duration {
	if id == m.cfg.ID {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, known := m.states[id]
	if !known {
		return time.Since(time.Unix(0, m.start))
	}
	if st != wire.NodeDead && st != wire.NodeLeft {
		return 0
	}
	return time.Since(m.since[id])
}

// reports returns the move reports of every alive member's leader table
// (this node's included), each with its reporter's led groups.
func (m *membership) reports() []memberReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []memberReport
	for id, t := range m.decoded {
		if _, alive := m.alive[id]; !alive && id != m.cfg.ID {
			continue
		}
		for _, r := range t.Reports {
			if _, leads := t.Groups[r.group()]; leads {
				out = append(out, memberReport{From: id, Report: r})
			}
		}
	}
	slices.SortFunc(out, func(a, b memberReport) int {
		return cmpString(a.From+a.Report.group()+a.Report.Node, b.From+b.Report.group()+b.Report.Node)
	})
	return out
}

// memberReport is a move report and the member that made it.
type memberReport struct {
	From   string
	Report moveReport
}

// leads returns how many groups member id leads by its latest leader
// table (this node's own when id is this node).
// catchUpState returns the nodes that alive members (this node included)
// announce with a replica behind in a group they lead, and the alive
// members that announced, since their last start, that they opened all
// their replicas.
func (m *membership) catchUpState() (behind, opened map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	behind, opened = map[string]bool{}, map[string]bool{}
	for from, t := range m.decoded {
		if _, alive := m.alive[from]; !alive && from != m.cfg.ID {
			continue
		}
		for _, id := range t.Behind {
			behind[id] = true
		}
		opened[from] = !t.Opening
	}
	return behind, opened
}

// leads returns how many raft groups node id leads, by its last leader
// table (this node's own, for itself).
func (m *membership) leads(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id == m.cfg.ID {
		return len(m.mine.Groups)
	}
	return len(m.decoded[id].Groups)
}
