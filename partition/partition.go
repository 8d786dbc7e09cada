package partition

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/raftutil"
	"github.com/ferrymq/ferry/wal"
	"github.com/ferrymq/ferry/wal/raftlog"
	"github.com/hashicorp/raft"
)

// Sizes of the raft stores.
const (
	snapshotsKept = 2
)

// Partition is one running replica of a queue partition.
type Partition struct {
	cfg    Config
	logger *slog.Logger
	now    func() time.Time

	mu      sync.Mutex // guards fsm, applied, ready, receiveClaimed
	fsm     *fsm.FSM
	applied uint64        // index of the last raft entry applied
	ready   chan struct{} // closed and replaced when messages become eligible
	// receiveClaimed counts the messages that receives proposed and not
	// yet answered count on (claimReceive); guarded by mu.
	receiveClaimed int64
	// receivesWaiting counts the Receive calls in progress.
	receivesWaiting atomic.Int64
	// digestWaits are the DigestAt requests waiting for an entry; guarded
	// by mu, at most digestWaitsMax.
	digestWaits []*digestWait

	disk     *diskGuard
	body     *wal.Log       // body records: payloads not in any local entry
	bodies   *replicaBodies // where every payload lives
	starting atomic.Bool    // raft.NewRaft is running: snapshots restore locally
	snaps    *snapshotTrigger
	raft     *raft.Raft
	logs     *raftlog.GroupLog // the raft log and term and vote, in the node's shared store
	logStore *raftlog.Store    // the store holding logs
	ownLogs  *raftlog.Store    // set when the partition opened its own store
	ticks    tickTimer         // the leader's tick, armed for the next deadline
	// deadline is the FSM's next deadline after the last apply (Unix
	// nanoseconds on the partition clock; 0: none), read without the lock
	// by the sweep that catches a tick armed too late (rearmIfLate).
	deadline  atomic.Int64
	clockMark clockMark   // guarded by mu; see clockMark
	evictions evictionLog // used only on raft's FSM goroutine
	clockGap  clockGap
	sends     *batcher[fsm.NewMessage, fsm.SendOutcome]
	acks      *batcher[fsm.Receipt, error]
	reads     readGate // see ReadBarrier
	// beforeApply, when set (by tests only), runs on raft's FSM goroutine
	// before each batch of entries is applied.
	beforeApply atomic.Pointer[func()]
	closing     chan struct{}
	// raftDown is closed once raft has shut down (see waitApplied).
	raftDown  chan struct{}
	closeOnce sync.Once
	// loops counts the replica's goroutines and scheduler jobs (see
	// track); Close waits for them. stopped (under trackMu) refuses more.
	loops   sync.WaitGroup
	trackMu sync.Mutex
	stopped bool
}

// Open starts the replica: it opens its stores, starts raft (restoring the
// newest snapshot and catching up from the leader), and bootstraps the group
// from cfg.Peers when no replica state exists yet.
//
// Restarting costs the newest local snapshot's metadata plus the log
// entries after it, whatever the backlog: payloads stay where they are, in
// the raft log's entries and the body records (see replicaBodies).
func Open(cfg Config) (*Partition, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Partition{
		cfg: cfg, logger: cfg.Logger, now: cfg.Now,
		ready:    make(chan struct{}),
		closing:  make(chan struct{}),
		raftDown: make(chan struct{}),
		snaps:    newSnapshotTrigger(),
	}
	if p.logger == nil {
		p.logger = slog.Default()
	}
	p.logger = p.logger.With("group", cfg.GroupID)
	if p.now == nil {
		p.now = time.Now
	}
	reserve := cfg.DiskReserveBytes
	if reserve == 0 {
		reserve = DefaultDiskReserveBytes
	}
	p.disk = &diskGuard{dir: cfg.Dir, reserveBytes: reserve, free: freeBytesOf}
	if err := p.openStores(); err != nil {
		p.closeStores()
		return nil, err
	}
	if err := p.startRaft(); err != nil {
		p.closeStores()
		return nil, err
	}
	p.startBatchers()
	sharedScheduler.register(p)
	return p, nil
}

// openStores opens the group's raft log and stable store (term, vote),
// the body records and the FSM on them.
func (p *Partition) openStores() error {
	if err := os.MkdirAll(p.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("partition %s: %w", p.cfg.GroupID, err)
	}
	if err := p.openLogs(); err != nil {
		return err
	}
	walDir := filepath.Join(p.cfg.Dir, "wal")
	if err := os.MkdirAll(walDir, 0o755); err != nil {
		return fmt.Errorf("partition %s: %w", p.cfg.GroupID, err)
	}
	wc := wal.DefaultConfig(walDir)
	wc.Files = p.cfg.WALFiles
	if wc.Files == nil {
		wc.Files = SharedWALFiles()
	}
	body, _, err := wal.Open(wc)
	if err != nil {
		return fmt.Errorf("partition %s: open wal: %w", p.cfg.GroupID, err)
	}
	p.body = body
	p.bodies = newReplicaBodies(body, p.logs, p.logStore)
	f, err := fsm.New(p.cfg.Queue, p.bodies)
	if err != nil {
		return fmt.Errorf("partition %s: %w", p.cfg.GroupID, err)
	}
	f.SetMaxClockStep(p.cfg.MaxClockStep)
	p.fsm = f
	return nil
}

// SharedWALFiles returns the process's cache of WAL segment files, used
// by every replica whose Config.WALFiles is nil: at most
// wal.DefaultFileCacheCapacity message-WAL segment files are open at once
// in the process, and a replica idle for twice wal.DefaultFileIdleTimeout
// holds none.
func SharedWALFiles() *wal.FileCache {
	return sharedWALFiles()
}

var sharedWALFiles = sync.OnceValue(func() *wal.FileCache {
	c, err := wal.NewFileCache(wal.FileCacheConfig{})
	if err != nil {
		panic(err) // the defaults are valid
	}
	return c
})

// startRaft starts the raft group. raft restores the newest snapshot
// inside NewRaft, locally (starting is set); with no snapshot to restore,
// the body records of an earlier run are released first.
func (p *Partition) startRaft() error {
	hlog := raftutil.RaftLogger(p.logger)
	files, err := raft.NewFileSnapshotStoreWithLogger(p.cfg.Dir, snapshotsKept, hlog.Named("snapshots"))
	if err != nil {
		return fmt.Errorf("partition %s: snapshot store: %w", p.cfg.GroupID, err)
	}
	snaps := &replicaSnapshots{SnapshotStore: files, p: p}
	if list, err := files.List(); err != nil || len(list) == 0 {
		if err := p.bodies.finishRestore(); err != nil {
			return fmt.Errorf("partition %s: release old body records: %w", p.cfg.GroupID, err)
		}
	}
	cached := newBoundedLogCache(&flooredLog{GroupLog: p.logs, bodies: p.bodies})
	p.starting.Store(true)
	r, err := raft.NewRaft(p.cfg.raftConfig(p.logger), (*raftFSM)(p), cached, p.logs, snaps, p.cfg.Transport)
	p.starting.Store(false)
	if err != nil {
		return fmt.Errorf("partition %s: start raft: %w", p.cfg.GroupID, err)
	}
	p.mu.Lock()
	p.raft = r // ApplyBatch may already run: a leader can reach a joining replica at once
	p.mu.Unlock()
	if changes := p.cfg.LeaderChanges; changes != nil {
		// The filter counts and sends nothing: no channel, no goroutine.
		r.RegisterObserver(raft.NewObserver(nil, false, func(o *raft.Observation) bool {
			if _, ok := o.Data.(raft.LeaderObservation); ok {
				changes.Add(1)
			}
			return false
		}))
	}
	return p.bootstrap(cached, p.logs, snaps)
}

// openLogs opens the group's raft log and stable store in the node's
// shared store (or in a store of its own under Dir when Config.Logs is
// nil) and moves into it what an older version kept in the replica's
// raft.db (entries, term and vote), which then goes.
func (p *Partition) openLogs() error {
	store := p.cfg.Logs
	if store == nil {
		own, _, err := raftlog.Open(raftlog.DefaultConfig(filepath.Join(p.cfg.Dir, "log")))
		if err != nil {
			return fmt.Errorf("partition %s: open raft log: %w", p.cfg.GroupID, err)
		}
		store, p.ownLogs = own, own
	}
	p.logStore = store
	g, err := store.Group(p.cfg.GroupID)
	if err != nil {
		return fmt.Errorf("partition %s: open raft log: %w", p.cfg.GroupID, err)
	}
	p.logs = g
	if err := migrateBolt(p.cfg.Dir, g, g); err != nil {
		return fmt.Errorf("partition %s: move raft state out of %s: %w", p.cfg.GroupID, boltFile, err)
	}
	return nil
}

// closeStores closes what startRaft opened.
func (p *Partition) closeStores() {
	if p.body != nil {
		p.body.Close()
	}
	if p.ownLogs != nil {
		p.ownLogs.Close()
	}
}

// bootstrap starts a brand-new group from cfg.Peers. A replica with any raft
// state, or one that another replica's leader has already contacted, skips it.
func (p *Partition) bootstrap(logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) error {
	if len(p.cfg.Peers) == 0 {
		return nil
	}
	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil || has {
		return err
	}
	f := p.raft.BootstrapCluster(raft.Configuration{Servers: p.cfg.Peers})
	if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("partition %s: bootstrap: %w", p.cfg.GroupID, err)
	}
	return nil
}

// Close stops the replica. A leader first tries to hand leadership over so
// that clients see a short gap rather than an election timeout.
func (p *Partition) Close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.closing)
		sharedScheduler.unregister(p)
		p.stopTracking()
		p.stopTick()
		if p.raft.State() == raft.Leader && len(p.raft.GetConfiguration().Configuration().Servers) > 1 {
			if terr := p.raft.LeadershipTransfer().Error(); terr != nil {
				p.logger.Debug("leadership transfer before close failed", "err", terr)
			}
		}
		err = p.raft.Shutdown().Error()
		close(p.raftDown)
		p.loops.Wait()
		if c, ok := p.cfg.Transport.(io.Closer); ok {
			c.Close()
		}
		p.mu.Lock()
		p.closeStores()
		p.mu.Unlock()
	})
	return err
}
