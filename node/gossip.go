package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

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
	var t leaderTable
	if json.Unmarshal(b, &t) == nil {
		(*membership)(d).mergeTable(t)
	}
}

// GetBroadcasts hands memberlist the queued leader-table updates.
func (d *gossipDelegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.queue.GetBroadcasts(overhead, limit)
}

// LocalState sends every known leader table on push/pull syncs, so a node
// that missed broadcasts (or just joined) converges.
func (d *gossipDelegate) LocalState(join bool) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	tables := make([]leaderTable, 0, len(d.tables))
	for _, t := range d.tables {
		tables = append(tables, t)
	}
	b, _ := json.Marshal(tables)
	return b
}

// MergeRemoteState merges leader tables from a push/pull sync.
func (d *gossipDelegate) MergeRemoteState(buf []byte, join bool) {
	var tables []leaderTable
	if json.Unmarshal(buf, &tables) != nil {
		return
	}
	for _, t := range tables {
		(*membership)(d).mergeTable(t)
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

func (m *membership) update(n *memberlist.Node, state wire.NodeState) {
	var mm memberMeta
	if err := json.Unmarshal(n.Meta, &mm); err != nil || mm.ID == "" {
		m.n.logger.Warn("ignoring gossip member without valid metadata", "name", n.Name)
		return
	}
	m.mu.Lock()
	m.states[mm.ID] = state
	if state == wire.NodeAlive {
		m.alive[mm.ID] = mm
	} else {
		delete(m.alive, mm.ID)
	}
	m.mu.Unlock()
	m.notify()
}

// slogWriter turns memberlist's log lines ("[LEVEL] memberlist: ...") into
// slog records at a matching level.
type slogWriter struct{ l *slog.Logger }

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
