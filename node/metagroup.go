package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/ferrymq/ferry/internal/clock"
	"github.com/ferrymq/ferry/internal/raftutil"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/transport"
	"github.com/ferrymq/ferry/wire"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// catalogLagMax bounds how long a request waits for this node's catalog to
// catch up with a queue it does not know yet.
const catalogLagMax = time.Second

// metaGroup hosts this node's replica of the meta raft group: the queue
// catalog and the node registry.
type metaGroup struct {
	self     metaSelf
	mu       sync.Mutex // guards fsm
	fsm      *meta.FSM
	raft     *raft.Raft
	store    *raftboltdb.BoltStore
	trans    *transport.BoundedTransport
	hasState bool
	changed  chan struct{} // poked after every apply
	applied  chan struct{} // closed and replaced after every apply (guarded by mu)
	// version counts the catalog's changes (applies and restores),
	// guarded by mu: a view read at one version is still current while it
	// has not moved (catalogview.go). raft's applied index is no such
	// key: raft moves it when it hands entries to the state machine,
	// which may apply them later.
	version uint64
	// queues caches catalog entries looked up since the last apply or
	// restore, which empty it (guarded by mu): a lookup per request then
	// copies nothing. Entries are shared and must never be modified.
	queues map[string]meta.Queue
}

// metaCommitTimeout paces the meta group's empty AppendEntries, which carry
// the commit index to followers when no new entry does.
const metaCommitTimeout = 50 * time.Millisecond

// metaSelf is what the meta group knows of its node: who it is and how
// its clock stands.
type metaSelf struct {
	id          string
	incarnation uint64
	// freshDir is set when the data directory is new or wiped.
	freshDir bool
	logger   *slog.Logger
	// clockProblem says why the node's clock cannot be trusted now, ""
	// when it can (a catalog change is stamped with it).
	clockProblem func() string
}

// openMetaGroup opens this node's replica of the meta group in
// DataDir/meta, with the partitions' timings but raft's 50 ms
// CommitTimeout. A replica in a new or wiped data directory starts
// abstaining from elections (see stopAbstaining).
func openMetaGroup(self metaSelf, cfg *Config, raftNet *transport.Shared, trans *transport.BoundedTransport) (*metaGroup, error) {
	g := &metaGroup{self: self, fsm: meta.New(), changed: make(chan struct{}, 1), applied: make(chan struct{})}
	dir := filepath.Join(cfg.DataDir, "meta")
	pc := cfg.partitionConfig(partition.DefaultConfig(meta.MetaGroupID, cfg.ID, dir))
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout, rc.ElectionTimeout = pc.HeartbeatTimeout, pc.ElectionTimeout
	// Every node serves requests from its own replica of the catalog, so
	// followers must learn commits at once: the meta group keeps raft's
	// 50 ms CommitTimeout (one group: its cost does not grow with queues).
	rc.LeaderLeaseTimeout, rc.CommitTimeout = pc.LeaderLeaseTimeout, metaCommitTimeout
	rc.SnapshotThreshold, rc.TrailingLogs = 1024, 2048
	rc.NoLegacyTelemetry = true
	// The meta group quiesces like a partition: 2 s after its last entry,
	// once its followers have every entry and know the commit index (so
	// each node's catalog is current), its leader stops heartbeating
	// them; a new entry wakes them at once. Without it, the meta leader's
	// node was the one over 5% of a core at 1,000 idle queues.
	if raftNet != nil && pc.QuiesceAfter > 0 {
		rc.Liveness, rc.QuiesceAfter = raftNet, pc.QuiesceAfter
	}
	rc.Logger = raftutil.RaftLogger(self.logger.With("group", meta.MetaGroupID))
	g.trans = trans
	if err := g.start(dir, rc); err != nil {
		g.trans.Close()
		return nil, err
	}
	if self.freshDir && !g.hasState {
		// A new or wiped data directory: this replica may have been a
		// voter that acknowledged entries it no longer has. It votes
		// again once it bootstraps the group itself, or once it has
		// applied its own registration with this incarnation (which
		// comes after everything it may have acknowledged before).
		g.raft.SetAbstain(true)
	}
	return g, nil
}

// stopAbstaining lets a replica that started abstaining (see
// openMetaGroup) vote once the catalog it applied holds this node's
// registration with its current incarnation.
func (g *metaGroup) stopAbstaining() {
	if !g.raft.Abstaining() {
		return
	}
	var registered bool
	g.view(func(f *meta.FSM) {
		nd, ok := f.Node(g.self.id)
		registered = ok && nd.Incarnation == g.self.incarnation
	})
	if registered {
		g.raft.SetAbstain(false)
		g.self.logger.Info("meta replica votes again: this node's registration is applied")
	}
}

// start opens the group's bolt log and stable store and its snapshot store
// in dir, notes whether it has state, and starts raft.
func (g *metaGroup) start(dir string, rc *raft.Config) error {
	if err := mkdir(dir); err != nil {
		return err
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dir, "raft.db"),
		BoltOptions: &bbolt.Options{NoFreelistSync: true, Timeout: time.Second},
	})
	if err != nil {
		return fmt.Errorf("meta: open raft log: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, rc.Logger.Named("snapshots"))
	if err != nil {
		store.Close()
		return fmt.Errorf("meta: snapshot store: %w", err)
	}
	if g.hasState, err = raft.HasExistingState(store, store, snaps); err != nil {
		store.Close()
		return err
	}
	r, err := raft.NewRaft(rc, (*metaFSM)(g), store, store, snaps, g.trans)
	if err != nil {
		store.Close()
		return fmt.Errorf("meta: start raft: %w", err)
	}
	g.raft, g.store = r, store
	return nil
}

// bootstrap forms the meta group with the given voters (identical on every
// bootstrapping node). A node that forms the group has nothing to forget:
// it stops abstaining.
func (g *metaGroup) bootstrap(voters []raft.Server) error {
	g.raft.SetAbstain(false)
	err := g.raft.BootstrapCluster(raft.Configuration{Servers: voters}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("meta: bootstrap: %w", err)
	}
	g.hasState = true
	return nil
}

// isLeader reports whether this node's replica leads the meta group.
// catalogVersion is the catalog's change count (applies and restores):
// unlike raft's applied index, which raft moves once it has handed an
// entry to the state machine, it moves only after the catalog changed.
func (g *metaGroup) catalogVersion() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.version
}

func (g *metaGroup) isLeader() bool { return g.raft.State() == raft.Leader }

// leaderID returns the meta leader's node id, or "".
func (g *metaGroup) leaderID() string {
	_, id := g.raft.LeaderWithID()
	return string(id)
}

// caughtUp reports whether the catalog is known to be current: a meta
// leader is known and every entry this replica knows to be committed has
// been handed to the catalog. A restarted replica stays at its last
// snapshot, with commit index 0, until the leader's first append.
func (g *metaGroup) caughtUp() bool {
	commit := g.raft.CommitIndex()
	return g.leaderID() != "" && commit > 0 && g.raft.AppliedIndex() >= commit
}

// registered reports whether every server of the meta group is in the
// catalog's node registry. Until then (just after the cluster formed, or
// a node joined) the registry undercounts the cluster, and a queue created
// with the default replica count, min(3, registered nodes), would get
// fewer replicas than the cluster can give it: propose refuses such a
// creation as unavailable, which clients retry.
func (g *metaGroup) registered() bool {
	servers, err := g.servers()
	if err != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range servers {
		if _, ok := g.fsm.Node(string(s.ID)); !ok {
			return false
		}
	}
	return true
}

// propose applies a catalog command through the meta group (leader only).
func (g *metaGroup) propose(ctx context.Context, c meta.Command) (meta.Result, error) {
	if !g.isLeader() {
		return meta.Result{}, &raftutil.NotLeaderError{LeaderID: g.leaderID()}
	}
	if c.Type == meta.CmdCreateQueue && c.CreateQueue.Config.Replicas == 0 && !g.registered() {
		return meta.Result{}, wire.Errorf(wire.CodeUnavailable,
			"cluster membership still settling: a meta group member is not registered yet, so the default replica count is not known")
	}
	if p := g.self.clockProblem(); p != "" {
		return meta.Result{}, fmt.Errorf("%w: %s", partition.ErrClockUnverified, p)
	}
	c.At = clock.Now().UnixNano()
	data, err := meta.EncodeCommand(c)
	if err != nil {
		return meta.Result{}, err
	}
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	f := g.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return meta.Result{}, &raftutil.NotLeaderError{LeaderID: g.leaderID()}
		case errors.Is(err, raft.ErrLeadershipLost):
			return meta.Result{}, partition.ErrUnknownOutcome
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return meta.Result{}, partition.ErrTimeout
		case errors.Is(err, raft.ErrRaftShutdown):
			return meta.Result{}, ErrClosed
		}
		return meta.Result{}, err
	}
	res, _ := f.Response().(meta.Result)
	return res, nil
}

// queue looks a queue up. A node that does not lead the meta group may lag
// behind it by a few milliseconds, so a queue just created elsewhere may
// not be applied here yet: a missing queue is looked for again after each
// catalog apply for up to catalogLagMax before it is reported missing.
// The queue returned shares its slices with other lookups: callers must
// not modify it.
func (g *metaGroup) queue(ctx context.Context, name string) (meta.Queue, bool) {
	// The common case, a known queue, answers from memory without a timer
	// or a copy.
	g.mu.Lock()
	q, ok := g.cachedQueueLocked(name)
	g.mu.Unlock()
	if ok {
		return q, true
	}
	deadline := time.NewTimer(catalogLagMax)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		q, ok := g.fsm.Queue(name)
		applied := g.applied
		g.mu.Unlock()
		if ok || g.isLeader() {
			return q, ok
		}
		select {
		case <-applied:
		case <-deadline.C:
			return q, false
		case <-ctx.Done():
			return q, false
		}
	}
}

// cachedQueueLocked returns the catalog entry of a queue from the cache,
// copying it there first if needed. The caller holds mu.
func (g *metaGroup) cachedQueueLocked(name string) (meta.Queue, bool) {
	if q, ok := g.queues[name]; ok {
		return q, true
	}
	q, ok := g.fsm.Queue(name)
	if !ok {
		return q, false
	}
	if g.queues == nil {
		g.queues = make(map[string]meta.Queue)
	}
	g.queues[name] = q // at most every queue of the catalog, emptied on apply
	return q, true
}

// view runs fn on the catalog under the lock.
func (g *metaGroup) view(fn func(f *meta.FSM)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g.fsm)
}

// servers returns the meta group's raft configuration.
func (g *metaGroup) servers() ([]raft.Server, error) {
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

// close stops the replica: a leader with peers hands leadership over
// first; then the transport, raft and the store close, in that order.
func (g *metaGroup) close() {
	if g.isLeader() {
		if cfg, err := g.servers(); err == nil && len(cfg) > 1 {
			g.raft.LeadershipTransfer().Error()
		}
	}
	// The transport closes first: hashicorp/raft answers a heartbeat on
	// the transport's goroutine, which Shutdown does not wait for, and one
	// still running when the store closes panics ("failed to save current
	// term: database not open").
	g.trans.Close()
	g.raft.Shutdown().Error()
	g.store.Close()
}

// metaFSM adapts the catalog to raft.FSM.
type metaFSM metaGroup

// Apply applies one catalog command.
func (m *metaFSM) Apply(l *raft.Log) any {
	g := (*metaGroup)(m)
	g.mu.Lock()
	res := g.fsm.Apply(l.Data)
	g.queues = nil
	g.version++
	close(g.applied)
	g.applied = make(chan struct{})
	g.mu.Unlock()
	select {
	case g.changed <- struct{}{}:
	default:
	}
	return res
}

// Snapshot freezes the catalog.
func (m *metaFSM) Snapshot() (raft.FSMSnapshot, error) {
	g := (*metaGroup)(m)
	g.mu.Lock()
	defer g.mu.Unlock()
	return metaSnapshot{g.fsm.Snapshot()}, nil
}

// Restore replaces the catalog.
func (m *metaFSM) Restore(rc io.ReadCloser) error {
	g := (*metaGroup)(m)
	defer rc.Close()
	g.mu.Lock()
	err := g.fsm.Restore(rc)
	g.queues = nil
	g.version++
	g.mu.Unlock()
	select {
	case g.changed <- struct{}{}:
	default:
	}
	return err
}

// metaSnapshot is a frozen catalog that raft persists.
type metaSnapshot struct{ s *meta.Snapshot }

// Persist writes the catalog snapshot to sink, cancelling the sink on
// failure.
func (s metaSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.s.Persist(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release frees the frozen catalog.
func (s metaSnapshot) Release() { s.s.Release() }
