package partition

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/transport"
	"github.com/ferrymq/ferry/wal"
	"github.com/ferrymq/ferry/wal/raftlog"
	"github.com/hashicorp/raft"

	"github.com/ferrymq/ferry/internal/procfd"
)

// idleNodes runs groups partitions of three replicas on three nodes, each
// node with one mux and one shared raft log store, as a node runs them.
type idleNodes struct {
	t      *testing.T
	muxes  []*transport.Mux
	stores []*raftlog.Store
	peers  []raft.Server
	reps   [][]*Partition // [group][node]
}

func newIdleNodes(t *testing.T, groups int, tweak func(*Config)) *idleNodes {
	t.Helper()
	root := t.TempDir()
	c := &idleNodes{t: t}
	t.Cleanup(c.close)
	for i := range 3 {
		m := newTestMux(t)
		c.muxes = append(c.muxes, m)
		sc := raftlog.DefaultConfig(filepath.Join(root, fmt.Sprintf("n%d", i+1), "raftlog"))
		sc.Logger = testLogger()
		s, _, err := raftlog.Open(sc)
		if err != nil {
			t.Fatal(err)
		}
		c.stores = append(c.stores, s)
		c.peers = append(c.peers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i+1)), Address: raft.ServerAddress(m.Addr().String())})
	}
	for g := range groups {
		group := fmt.Sprintf("idle-%d", g)
		var reps []*Partition
		for i := range 3 {
			layer, err := c.muxes[i].Group(group)
			if err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig(group, string(c.peers[i].ID), filepath.Join(root, fmt.Sprintf("n%d", i+1), group))
			cfg.Transport = testTransport(layer)
			cfg.Logs = c.stores[i]
			cfg.Peers = c.peers
			cfg.HeartbeatTimeout, cfg.ElectionTimeout = 200*time.Millisecond, 200*time.Millisecond
			cfg.LeaderLeaseTimeout = 150 * time.Millisecond
			cfg.Logger = testLogger()
			if tweak != nil {
				tweak(&cfg)
			}
			p, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			reps = append(reps, p)
		}
		c.reps = append(c.reps, reps)
	}
	return c
}

// leaders waits until every group has a leader.
func (c *idleNodes) leaders() {
	c.t.Helper()
	testwait.Until(c.t, 20*time.Second, "a leader in every group", func() bool {
		for _, reps := range c.reps {
			led := false
			for _, p := range reps {
				led = led || p.IsLeader()
			}
			if !led {
				return false
			}
		}
		return true
	})
}

// logEnds returns every replica's raft term and last log index.
func (c *idleNodes) logEnds() [][2]uint64 {
	var out [][2]uint64
	for _, reps := range c.reps {
		for _, p := range reps {
			st := p.RaftStats()
			term, _ := strconv.ParseUint(st["term"], 10, 64)
			last, _ := strconv.ParseUint(st["last_log_index"], 10, 64)
			out = append(out, [2]uint64{term, last})
		}
	}
	return out
}

// appendedWhileIdle compares two logEnds: it returns the replicas whose log
// grew within one term (an election appends raft's own entry, which a
// loaded machine may cause) and how many kept their term.
func appendedWhileIdle(before, after [][2]uint64) (grew []int, sameTerm int) {
	for i := range before {
		if before[i][0] != after[i][0] {
			continue
		}
		sameTerm++
		if after[i][1] != before[i][1] {
			grew = append(grew, i)
		}
	}
	return grew, sameTerm
}

// settled reports whether no replica holds a deadline and every replica
// of a group has the same last index.
func (c *idleNodes) settled() bool {
	for _, reps := range c.reps {
		var last []string
		for _, p := range reps {
			p.mu.Lock()
			_, pending := p.fsm.NextDeadline()
			p.mu.Unlock()
			if pending {
				return false
			}
			last = append(last, p.RaftStats()["last_log_index"]+"/"+p.RaftStats()["applied_index"])
		}
		if last[0] != last[1] || last[0] != last[2] {
			return false
		}
	}
	return true
}

func (c *idleNodes) close() {
	for _, reps := range c.reps {
		for _, p := range reps {
			p.Close()
		}
	}
	for _, s := range c.stores {
		s.Close()
	}
	for _, m := range c.muxes {
		m.Close()
	}
}

// goroutinesByCreator counts the running goroutines by the package of the
// function that started them: "partition", "raft", "transport", "other".
func goroutinesByCreator() map[string]int {
	out := map[string]int{}
	for _, s := range testwait.Goroutines() {
		i := strings.LastIndex(s, "\ncreated by ")
		creator := ""
		if i >= 0 {
			creator = s[i:]
		}
		switch {
		case strings.Contains(creator, "ferry/partition."):
			out["partition"]++
		case strings.Contains(creator, "hashicorp/raft."):
			out["raft"]++
		case strings.Contains(creator, "ferry/transport."):
			out["transport"]++
		default:
			out["other"]++
		}
	}
	return out
}

// Idle replicas (no messages, so no deadlines) run no goroutine of their
// own, leaders and followers alike, and propose nothing: only the
// process's shared scheduler (idleSchedulerGoroutines) runs for all of
// them. Goroutines started by raft and the transport are counted and
// logged apart (they are theirs, not the partition's).
func TestPartition_IdleReplicasRunNoGoroutinesAndProposeNothing(t *testing.T) {
	const groups = 6
	before := goroutinesByCreator()
	c := newIdleNodes(t, groups, func(cfg *Config) {
		// A short step: a leader that kept the clock fresh by ticking
		// would tick every 100 ms.
		cfg.MaxClockStep = 300 * time.Millisecond
		cfg.Queue.DedupWindow = 50 * time.Millisecond
	})
	c.leaders()
	// One message per group, through the batcher: the partition clock is
	// set (a leader keeping it fresh would tick), its dedup entry is a
	// deadline that passes, and the batcher's goroutines must end.
	sendAll := func(prefix string) {
		t.Helper()
		for g, reps := range c.reps {
			for _, p := range reps {
				if !p.IsLeader() {
					continue
				}
				out, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: fmt.Sprintf("%s%d", prefix, g), Body: []byte("b")}})
				if err != nil || out[0].Err != nil {
					t.Fatalf("send to group %d: %v %v", g, err, out)
				}
			}
		}
	}
	sendAll("first")
	testwait.Until(t, 10*time.Second, "every deadline passed and every replica caught up", c.settled)
	replicas := groups * 3
	var now map[string]int
	testwait.Until(t, 10*time.Second, "the partitions' own goroutines to be gone", func() bool {
		now = goroutinesByCreator()
		return now["partition"]-before["partition"] <= idleSchedulerGoroutines
	})
	ends := c.logEnds()
	time.Sleep(time.Second) // idle: what is under test
	now2 := c.logEnds()
	grew, sameTerm := appendedWhileIdle(ends, now2)
	if len(grew) > 0 || sameTerm < replicas/2 {
		t.Fatalf("idle groups appended entries (replicas %v of %d that kept their term): term/last index %v, then %v",
			grew, sameTerm, ends, now2)
	}
	now = goroutinesByCreator()
	for _, k := range []string{"partition", "raft", "transport", "other"} {
		t.Logf("%-9s goroutines: %3d for %d idle replicas (%.2f per replica)", k, now[k]-before[k], replicas,
			float64(now[k]-before[k])/float64(replicas))
	}
	if d := now["partition"] - before["partition"]; d > idleSchedulerGoroutines {
		t.Fatalf("%d partition goroutines for %d idle replicas, want at most the scheduler's %d", d, replicas, idleSchedulerGoroutines)
	}
	sendAll("again") // the batchers start again
	for _, reps := range c.reps {
		for _, p := range reps {
			if _, err := os.Stat(filepath.Join(p.cfg.Dir, boltFile)); !os.IsNotExist(err) {
				t.Fatalf("replica %s/%s has a %s: %v", p.cfg.GroupID, p.cfg.NodeID, boltFile, err)
			}
		}
	}
}

const idleSchedulerGoroutines = 1 + schedulerWorkers

// A replica that becomes leader while a lease is out expires it on time
// without any client activity: its tick is armed when it gains the
// leadership (by the scheduler's sweep), not only by its own applies.
func TestPartition_NewLeaderExpiresLeasesWithoutClients(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	send(t, c.reps[l], "a", 1)
	ds, err := c.reps[l].Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 1, Visibility: 2 * time.Second}, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %d", err, len(ds))
	}
	c.converged()
	c.stop(l)
	p := c.reps[c.leader()]
	testwait.Until(t, 10*time.Second, "the new leader to expire the lease", func() bool { return p.Stats().Counters.Expired == 1 })
}

// Followers compact too, from the shared scheduler: a payload that waits
// in an old entry is moved into a body record on every replica, so a
// follower's log is not pinned by it either.
func TestPartition_FollowersMoveOldPayloadsOut(t *testing.T) {
	c := newTestCluster(t, 3, storageConfig)
	l := c.leader()
	p := c.reps[l]
	send(t, p, "patient", 1)
	if held, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "slow", Max: 1, Visibility: time.Hour}, 0); err != nil || len(held) != 1 {
		t.Fatalf("receive the patient message: %v %d", err, len(held))
	}
	churn(t, p, 60)
	c.converged()
	for i, r := range c.reps {
		if i == l {
			continue
		}
		testwait.Until(t, 10*time.Second, fmt.Sprintf("follower %d to move the old payload out", i), func() bool {
			return r.body.Stats().RecordsAppended > 0
		})
	}
}

// walFDs counts this process's open descriptors on segment files of the
// message WAL of replicas under root (root/<node>/<group>/wal/*.seg).
func walFDs(t *testing.T, root string) int {
	t.Helper()
	n, err := procfd.Count(func(target string) bool {
		return strings.HasPrefix(target, root+string(filepath.Separator)) &&
			filepath.Base(filepath.Dir(target)) == "wal" && strings.HasSuffix(target, ".seg")
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Every replica's message WAL opens its files through Config.WALFiles:
// with a cache of 4 files, 18 replicas never have more than 4 open, and
// once idle none at all. A replica with no WALFiles uses the process's
// shared cache.
func TestPartition_IdleReplicasHoldNoWALFiles(t *testing.T) {
	files, err := wal.NewFileCache(wal.FileCacheConfig{Capacity: 4, IdleTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const groups = 6
	c := newIdleNodes(t, groups, func(cfg *Config) { cfg.WALFiles = files })
	c.leaders()
	for g, reps := range c.reps {
		for _, p := range reps {
			if p.IsLeader() {
				send(t, p, fmt.Sprintf("g%d", g), 3)
			}
		}
	}
	root := filepath.Dir(filepath.Dir(c.reps[0][0].cfg.Dir))
	testwait.Until(t, 10*time.Second, "no WAL file open", func() bool {
		for _, reps := range c.reps {
			for _, p := range reps {
				if p.body.Stats().OpenFiles != 0 {
					return false
				}
			}
		}
		return files.Stats().Open == 0 && walFDs(t, root) == 0
	})
	if st := files.Stats(); st.Opens < groups*3 || st.OpenMax > 4 {
		t.Fatalf("cache %+v: want an open per replica at least, and at most 4 at once", st)
	}

	shared := SharedWALFiles().Stats().Opens
	newTestCluster(t, 1, nil)
	if SharedWALFiles().Stats().Opens == shared {
		t.Fatal("a replica without Config.WALFiles opened no file through the shared cache")
	}
}
