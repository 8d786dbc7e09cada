package node

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/wire"
	"github.com/hashicorp/memberlist"
)

// gossipDelegate carries node metadata and leader tables over memberlist.
type gossipDelegate membership

// NodeMeta returns this node's advertised addresses.
func (d *gossipDelegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.meta
}

// NotifyMsg receives another node's leader table.
func (d *gossipDelegate) NotifyMsg(b []byte) {
	var st signedTable
	if len(b) > leaderTableBytesMax || json.Unmarshal(b, &st) != nil {
		return
	}
	if err := (*membership)(d).mergeTable(st); err != nil && !errors.Is(err, errStaleTable) {
		d.logger.Debug("leader table ignored", "err", err)
	}
}

// leaderTableBytesMax bounds one gossiped leader table (a node leading
// every partition of a full catalog would need more, but memberlist's
// packets stop far below this anyway).
const leaderTableBytesMax = 1 << 20

// GetBroadcasts hands memberlist the queued leader-table updates.
func (d *gossipDelegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.queue.GetBroadcasts(overhead, limit)
}

// LocalState sends every known leader table on push/pull syncs, so a node
// that missed broadcasts (or just joined) converges.
func (d *gossipDelegate) LocalState(join bool) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	tables := make([]signedTable, 0, len(d.tables))
	for _, t := range d.tables {
		tables = append(tables, t)
	}
	b, _ := json.Marshal(tables)
	return b
}

// MergeRemoteState merges leader tables from a push/pull sync.
func (d *gossipDelegate) MergeRemoteState(buf []byte, join bool) {
	var tables []signedTable
	if json.Unmarshal(buf, &tables) != nil || len(tables) > meta.NodesMax {
		return
	}
	for _, t := range tables {
		_ = (*membership)(d).mergeTable(t)
	}
}

// gossipEvents tracks members' states from memberlist events.
type gossipEvents membership

// NotifyJoin records a member that joined (or came back).
func (e *gossipEvents) NotifyJoin(n *memberlist.Node) { (*membership)(e).update(n, wire.NodeAlive) }

// NotifyUpdate records changed metadata.
func (e *gossipEvents) NotifyUpdate(n *memberlist.Node) { (*membership)(e).update(n, wire.NodeAlive) }

// NotifyLeave records a member that left or was declared dead.
func (e *gossipEvents) NotifyLeave(n *memberlist.Node) {
	state := wire.NodeDead
	if n.State == memberlist.StateLeft {
		state = wire.NodeLeft
	}
	(*membership)(e).update(n, state)
}

// update records a member's new gossip state. A member that has not
// proven it holds the cluster secret counts as dead; one that left or
// restarted with a new signing key loses its leader table. Waiters on
// events are woken.
func (m *membership) update(n *memberlist.Node, state wire.NodeState) {
	var mm memberMeta
	if err := json.Unmarshal(n.Meta, &mm); err != nil || mm.ID == "" {
		m.logger.Warn("ignoring gossip member without valid metadata", "name", n.Name)
		return
	}
	if state == wire.NodeAlive && mm.ID != m.cfg.ID && !m.admitted(mm) {
		// Holding a gossip key is not enough: a member must prove it holds
		// the cluster secret for its id and addresses. Until it does it is
		// no member at all (not listed, not registered, no leader table).
		m.warnUnadmitted(mm.ID)
		state = wire.NodeDead
	}
	m.mu.Lock()
	if m.states[mm.ID] != state {
		m.since[mm.ID] = time.Now()
	}
	m.states[mm.ID] = state
	old, wasAlive := m.alive[mm.ID]
	if state == wire.NodeAlive {
		m.alive[mm.ID] = mm
	} else {
		delete(m.alive, mm.ID)
	}
	if mm.ID != m.cfg.ID && (state != wire.NodeAlive || (wasAlive && old.SignKey != mm.SignKey)) {
		// A member that left, or restarted with a new signing key, loses
		// its leader table: a new one must come from it.
		delete(m.tables, mm.ID)
		delete(m.decoded, mm.ID)
	}
	m.mu.Unlock()
	m.changes.Add(1)
	m.notify()
}

// slogWriter turns memberlist's log lines ("[LEVEL] memberlist: ...") into
// slog records at a matching level.
type slogWriter struct{ l *slog.Logger }

// Write logs one memberlist line at the level its prefix names (debug
// when it names none).
func (w slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelDebug
	switch {
	case strings.HasPrefix(line, "[ERR]"):
		level = slog.LevelError
	case strings.HasPrefix(line, "[WARN]"):
		level = slog.LevelWarn
	case strings.HasPrefix(line, "[INFO]"):
		level = slog.LevelInfo
	}
	w.l.Log(context.Background(), level, line)
	return len(p), nil
}
