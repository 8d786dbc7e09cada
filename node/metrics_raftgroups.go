package node

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/wal/raftlog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	groupLabels   = []string{"group", "queue", "partition"}
	groupLeaderD  = prometheus.NewDesc("ferry_raft_leader_is_local", "1 when this node's replica leads the raft group, else 0.", groupLabels, nil)
	groupTermD    = prometheus.NewDesc("ferry_raft_term", "Current raft term of this node's replica of the group.", groupLabels, nil)
	groupCommitD  = prometheus.NewDesc("ferry_raft_commit_index", "Highest raft index this replica knows to be committed.", groupLabels, nil)
	groupAppliedD = prometheus.NewDesc("ferry_raft_applied_index", "Highest raft index this replica applied to its state machine.", groupLabels, nil)
	groupLagD     = prometheus.NewDesc("ferry_raft_apply_lag_entries", "Committed entries this replica has not applied yet.", groupLabels, nil)
	groupContactD = prometheus.NewDesc("ferry_raft_last_contact_seconds", "Time since this follower replica last heard from its leader (0 on the leader).", groupLabels, nil)
	groupSnapD    = prometheus.NewDesc("ferry_raft_snapshot_age_seconds", "Age of this replica's newest local snapshot (absent when it has none).", groupLabels, nil)
	walDiskD      = prometheus.NewDesc("ferry_wal_disk_bytes", "Size of the node's shared log segments (raft entries of every partition replica, message bodies inside them).", nil, nil)
	walLiveD      = prometheus.NewDesc("ferry_wal_live_bytes", "Bytes of the shared log that raft or a live message still needs.", nil, nil)
	walSegmentsD  = prometheus.NewDesc("ferry_wal_segments", "Segment files of the node's shared log.", nil, nil)
	raftEntriesD  = prometheus.NewDesc("ferry_raft_log_entries", "Raft entries indexed in the shared log, all partition groups together.", nil, nil)
	metaLogD      = prometheus.NewDesc("ferry_raft_meta_log_bytes", "Size of the meta group's raft log file.", nil, nil)
)

// groupCollector reports, for every raft group this node hosts (the meta
// group and each partition replica, led here or not), its role and
// progress, and the node's storage sizes.
type groupCollector struct{ src groupSource }

// groupSource is what groupCollector reads of its node.
type groupSource interface {
	// raftGroups describes every raft group the node hosts, the meta
	// group first (none before they open).
	raftGroups() []raftGroupView
	// logStats reads the shared raft log store's sizes; false before the
	// store is open.
	logStats() (raftlog.Stats, bool)
}

// raftGroupView is one raft group as the node hosts it.
type raftGroupView struct {
	stats map[string]string // raft's Stats
	dir   string            // the group's directory (snapshots; raft.db for the meta group)
	meta  bool              // the meta group
	// group, queue and partition are the series' labels (queue and
	// partition empty for the meta group).
	group, queue, partition string
}

// raftGroups implements groupSource.
func (n *Node) raftGroups() []raftGroupView {
	var out []raftGroupView
	if n.meta != nil && n.meta.raft != nil {
		out = append(out, raftGroupView{stats: n.meta.raft.Stats(), dir: filepath.Join(n.cfg.DataDir, "meta"), meta: true,
			group: meta.MetaGroupID})
	}
	if n.replicas != nil {
		for _, r := range n.replicas.all() {
			out = append(out, raftGroupView{stats: r.p.RaftStats(), dir: n.replicas.dir(r.a.GroupID),
				group: r.a.GroupID, queue: r.a.Queue, partition: itoa(r.a.Index)})
		}
	}
	return out
}

// logStats implements groupSource.
func (n *Node) logStats() (raftlog.Stats, bool) {
	if n.logs == nil {
		return raftlog.Stats{}, false
	}
	return n.logs.Stats(), true
}

// Describe implements prometheus.Collector.
func (c groupCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{groupLeaderD, groupTermD, groupCommitD, groupAppliedD, groupLagD, groupContactD,
		groupSnapD, walDiskD, walLiveD, walSegmentsD, raftEntriesD, metaLogD} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c groupCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, g := range c.src.raftGroups() {
		collectGroup(ch, g.stats, g.dir, now, g.group, g.queue, g.partition)
		if !g.meta {
			continue
		}
		if fi, err := os.Stat(filepath.Join(g.dir, "raft.db")); err == nil {
			ch <- prometheus.MustNewConstMetric(metaLogD, prometheus.GaugeValue, float64(fi.Size()))
		}
	}
	if st, ok := c.src.logStats(); ok {
		ch <- prometheus.MustNewConstMetric(walDiskD, prometheus.GaugeValue, float64(st.DiskBytes))
		ch <- prometheus.MustNewConstMetric(walLiveD, prometheus.GaugeValue, float64(st.LiveBytes))
		ch <- prometheus.MustNewConstMetric(walSegmentsD, prometheus.GaugeValue, float64(st.SegmentsLive))
		ch <- prometheus.MustNewConstMetric(raftEntriesD, prometheus.GaugeValue, float64(st.IndexEntries))
	}
}

// collectGroup reports one group from raft's stats and its snapshot
// directory.
func collectGroup(ch chan<- prometheus.Metric, st map[string]string, dir string, now time.Time, labels ...string) {
	labels[0] = labelValue(labels[0])
	leader := 0.0
	if st["state"] == raft.Leader.String() {
		leader = 1
	}
	commit, applied := statUint(st, "commit_index"), statUint(st, "applied_index")
	ch <- prometheus.MustNewConstMetric(groupLeaderD, prometheus.GaugeValue, leader, labels...)
	ch <- prometheus.MustNewConstMetric(groupTermD, prometheus.GaugeValue, float64(statUint(st, "term")), labels...)
	ch <- prometheus.MustNewConstMetric(groupCommitD, prometheus.GaugeValue, float64(commit), labels...)
	ch <- prometheus.MustNewConstMetric(groupAppliedD, prometheus.GaugeValue, float64(applied), labels...)
	ch <- prometheus.MustNewConstMetric(groupLagD, prometheus.GaugeValue, float64(commit-min(commit, applied)), labels...)
	if d, err := time.ParseDuration(st["last_contact"]); err == nil && leader == 0 {
		ch <- prometheus.MustNewConstMetric(groupContactD, prometheus.GaugeValue, d.Seconds(), labels...)
	} else if leader == 1 {
		ch <- prometheus.MustNewConstMetric(groupContactD, prometheus.GaugeValue, 0, labels...)
	}
	if at, ok := newestSnapshotAt(dir); ok {
		ch <- prometheus.MustNewConstMetric(groupSnapD, prometheus.GaugeValue, max(0, now.Sub(at).Seconds()), labels...)
	}
}

// statUint reads a number from raft's Stats map; 0 when absent or
// malformed.
func statUint(st map[string]string, key string) uint64 {
	v, _ := strconv.ParseUint(st[key], 10, 64)
	return v
}

// newestSnapshotAt reads the creation time of the newest snapshot in a
// raft file snapshot store under dir: raft names each one
// "<term>-<index>-<unix ms>".
func newestSnapshotAt(dir string) (time.Time, bool) {
	entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil {
		return time.Time{}, false
	}
	var newest int64
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		parts := strings.Split(e.Name(), "-")
		if len(parts) != 3 {
			continue
		}
		if ms, err := strconv.ParseInt(parts[2], 10, 64); err == nil && ms > newest {
			newest = ms
		}
	}
	if newest == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(newest), true
}
