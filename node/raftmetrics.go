package node

import (
	"strings"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// raftMetric names one metric hashicorp/raft reports through go-metrics and
// says how it is exported: as a histogram of seconds (timings) or of plain
// values, or as a counter. raft reports through one process-wide registry
// and never names its group, so these metrics cover every raft group of the
// process (the meta group and all partition replicas); per-group state is
// in the ferry_raft_* gauges read from each group (groupCollector).
type raftMetric struct {
	key   string // go-metrics key, parts joined with "."
	name  string // Prometheus name
	help  string
	kind  int     // raftTiming, raftSample or raftCounter
	scale float64 // multiplies the reported value (ms samples to seconds)
	peer  bool    // carries raft's peer_id label
}

// raftSeries is where the samples of one raft metric go: its single
// series, or for a peer metric its series by raw peer_id (resolved once
// per peer: looking a label value up hashes it under the vector's lock,
// and raft reports several samples per RPC).
type raftSeries struct {
	def    *raftMetric
	hist   *prometheus.HistogramVec
	count  *prometheus.CounterVec
	single func(v float64)
	mu     sync.Mutex
	peers  map[string]func(v float64)
}

// raftPeerSeriesMax bounds the peers whose series a metric keeps resolved;
// beyond it (a cluster that has seen that many peer ids) samples take the
// slower lookup.
const raftPeerSeriesMax = 256

const (
	raftTiming = iota
	raftSample
	raftCounter
)

// raftMetricDefs is the allow-list: go-metrics keys not named here are
// dropped, and each exported metric has its own help text.
var raftMetricDefs = []raftMetric{
	{key: "raft.commitTime", name: "ferry_raft_commit_seconds", help: "Time from a leader appending an entry to its commit on a majority.", kind: raftTiming, scale: 1},
	{key: "raft.fsm.apply", name: "ferry_raft_fsm_apply_seconds", help: "Time the state machine took to apply one entry (non-batching groups).", kind: raftTiming, scale: 1},
	{key: "raft.fsm.applyBatch", name: "ferry_raft_fsm_apply_batch_seconds", help: "Time the state machine took to apply one batch of entries.", kind: raftTiming, scale: 1},
	{key: "raft.fsm.applyBatchNum", name: "ferry_raft_fsm_apply_batch_entries", help: "Entries in each batch handed to the state machine.", kind: raftSample, scale: 1},
	{key: "raft.fsm.enqueue", name: "ferry_raft_fsm_enqueue_seconds", help: "Time committed entries waited to be handed to the state machine.", kind: raftTiming, scale: 1},
	{key: "raft.fsm.snapshot", name: "ferry_raft_fsm_snapshot_seconds", help: "Time the state machine took to capture a snapshot.", kind: raftTiming, scale: 1},
	{key: "raft.fsm.restore", name: "ferry_raft_fsm_restore_seconds", help: "Time the state machine took to restore a snapshot.", kind: raftTiming, scale: 1},
	{key: "raft.snapshot.create", name: "ferry_raft_snapshot_create_seconds", help: "Time to open a snapshot in the snapshot store.", kind: raftTiming, scale: 1},
	{key: "raft.snapshot.persist", name: "ferry_raft_snapshot_persist_seconds", help: "Time to write a snapshot to disk.", kind: raftTiming, scale: 1},
	{key: "raft.snapshot.takeSnapshot", name: "ferry_raft_snapshot_take_seconds", help: "Time to take a snapshot end to end (capture, persist, log compaction).", kind: raftTiming, scale: 1},
	{key: "raft.compactLogs", name: "ferry_raft_compact_logs_seconds", help: "Time to delete raft log entries covered by a snapshot.", kind: raftTiming, scale: 1},
	{key: "raft.leader.dispatchLog", name: "ferry_raft_leader_dispatch_seconds", help: "Time a leader took to write a batch of new entries to its own log.", kind: raftTiming, scale: 1},
	{key: "raft.leader.dispatchNumLogs", name: "ferry_raft_leader_dispatch_entries", help: "Entries a leader wrote to its own log in one batch.", kind: raftSample, scale: 1},
	{key: "raft.leader.lastContact", name: "ferry_raft_leader_last_contact_seconds", help: "Time since a leader last heard from a majority, sampled by its lease check.", kind: raftTiming, scale: 1e-3},
	{key: "raft.replication.appendEntries.rpc", name: "ferry_raft_replication_append_seconds", help: "Time of one AppendEntries call from a leader to a follower, by follower.", kind: raftTiming, scale: 1, peer: true},
	{key: "raft.replication.appendEntries.logs", name: "ferry_raft_replication_entries_total", help: "Entries a leader shipped to a follower, by follower.", kind: raftCounter, scale: 1, peer: true},
	{key: "raft.replication.heartbeat", name: "ferry_raft_replication_heartbeat_seconds", help: "Time of one heartbeat from a leader to a follower, by follower.", kind: raftTiming, scale: 1, peer: true},
	{key: "raft.replication.installSnapshot", name: "ferry_raft_replication_install_snapshot_seconds", help: "Time a leader took to ship a snapshot to a follower, by follower.", kind: raftTiming, scale: 1, peer: true},
	{key: "raft.rpc.appendEntries", name: "ferry_raft_rpc_append_seconds", help: "Time a follower took to handle one AppendEntries call.", kind: raftTiming, scale: 1},
	{key: "raft.rpc.appendEntries.storeLogs", name: "ferry_raft_rpc_store_logs_seconds", help: "Time a follower took to make received entries durable.", kind: raftTiming, scale: 1},
	{key: "raft.rpc.installSnapshot", name: "ferry_raft_rpc_install_snapshot_seconds", help: "Time a follower took to receive and install a snapshot.", kind: raftTiming, scale: 1},
	{key: "raft.rpc.requestVote", name: "ferry_raft_rpc_request_vote_seconds", help: "Time to handle one vote request.", kind: raftTiming, scale: 1},
	{key: "raft.candidate.electSelf", name: "ferry_raft_candidate_elect_seconds", help: "Time a candidate took to ask for votes.", kind: raftTiming, scale: 1},
	{key: "raft.apply", name: "ferry_raft_applies_total", help: "Commands proposed to raft on this node.", kind: raftCounter, scale: 1},
	{key: "raft.state.leader", name: "ferry_raft_became_leader_total", help: "Times a raft group on this node became leader.", kind: raftCounter, scale: 1},
	{key: "raft.state.candidate", name: "ferry_raft_became_candidate_total", help: "Times a raft group on this node started an election.", kind: raftCounter, scale: 1},
	{key: "raft.state.follower", name: "ferry_raft_became_follower_total", help: "Times a raft group on this node became follower.", kind: raftCounter, scale: 1},
	{key: "raft.transition.heartbeat_timeout", name: "ferry_raft_heartbeat_timeouts_total", help: "Times a follower lost contact with its leader and stood for election.", kind: raftCounter, scale: 1},
	{key: "raft.transition.leader_lease_timeout", name: "ferry_raft_leader_lease_timeouts_total", help: "Times a leader stepped down for lack of contact with a majority.", kind: raftCounter, scale: 1},
}

// raftSink receives raft's go-metrics and keeps them as Prometheus
// collectors. One serves the whole process, since go-metrics' registry
// is global; every node's registry collects from it.
type raftSink struct {
	series map[string]*raftSeries
	hists  []*prometheus.HistogramVec
	counts []*prometheus.CounterVec
}

var (
	raftSinkOnce   sync.Once
	raftSinkShared *raftSink
)

// processRaftSink installs the raft sink as go-metrics' global sink on
// first use and returns it.
func processRaftSink() *raftSink {
	raftSinkOnce.Do(func() {
		s := newRaftSink()
		cfg := gometrics.DefaultConfig("")
		cfg.EnableHostname, cfg.EnableRuntimeMetrics = false, false
		cfg.TimerGranularity = time.Second
		if _, err := gometrics.NewGlobal(cfg, s); err == nil {
			raftSinkShared = s
		} else {
			raftSinkShared = newRaftSink() // unreachable with a plain config; keeps /metrics serving
		}
	})
	return raftSinkShared
}

// newRaftSink builds the Prometheus series of every metric in
// raftMetricDefs; series of peer metrics are resolved on first sample.
func newRaftSink() *raftSink {
	s := &raftSink{series: map[string]*raftSeries{}}
	for i := range raftMetricDefs {
		d := &raftMetricDefs[i]
		var labels []string
		if d.peer {
			labels = []string{"peer"}
		}
		rs := &raftSeries{def: d}
		switch d.kind {
		case raftCounter:
			rs.count = prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.name, Help: d.help}, labels)
			s.counts = append(s.counts, rs.count)
		case raftSample:
			rs.hist = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.name, Help: d.help,
				Buckets: prometheus.ExponentialBuckets(1, 2, 12)}, labels)
			s.hists = append(s.hists, rs.hist)
		default:
			rs.hist = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.name, Help: d.help,
				Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14)}, labels)
			s.hists = append(s.hists, rs.hist)
		}
		if !d.peer {
			rs.single = rs.resolve()
		} else {
			rs.peers = map[string]func(float64){}
		}
		s.series[d.key] = rs
	}
	return s
}

// resolve returns the function that records a sample in the series with
// the given label values.
func (rs *raftSeries) resolve(values ...string) func(v float64) {
	if rs.hist != nil {
		return rs.hist.WithLabelValues(values...).Observe
	}
	c := rs.count.WithLabelValues(values...)
	return func(v float64) {
		if v >= 0 {
			c.Add(v)
		}
	}
}

// record adds one sample, to the series of its peer for a peer metric.
func (rs *raftSeries) record(v float64, labels []gometrics.Label) {
	if rs.single != nil {
		rs.single(v)
		return
	}
	peer := "unknown"
	for _, l := range labels {
		if l.Name == "peer_id" {
			peer = l.Value
			break
		}
	}
	rs.mu.Lock()
	f := rs.peers[peer]
	if f == nil {
		f = rs.resolve(labelValue(peer))
		if len(rs.peers) < raftPeerSeriesMax {
			rs.peers[peer] = f
		}
	}
	rs.mu.Unlock()
	f(v)
}

// Describe implements prometheus.Collector.
func (s *raftSink) Describe(ch chan<- *prometheus.Desc) {
	for _, h := range s.hists {
		h.Describe(ch)
	}
	for _, c := range s.counts {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (s *raftSink) Collect(ch chan<- prometheus.Metric) {
	for _, h := range s.hists {
		h.Collect(ch)
	}
	for _, c := range s.counts {
		c.Collect(ch)
	}
}

// raftKeyBytesMax bounds the go-metrics keys looked up without allocating;
// raft's are far shorter.
const raftKeyBytesMax = 128

// observe records a sample of the metric at key, scaled to its unit;
// keys not in raftMetricDefs are dropped. It allocates nothing for keys
// up to raftKeyBytesMax.
func (s *raftSink) observe(key []string, val float32, labels []gometrics.Label) {
	var buf [raftKeyBytesMax]byte
	k := buf[:0]
	for i, part := range key {
		if i > 0 {
			k = append(k, '.')
		}
		k = append(k, part...)
	}
	rs, ok := s.series[string(k)] // no allocation: the conversion is only a lookup key
	if !ok {
		return
	}
	rs.record(float64(val)*rs.def.scale, labels)
}

// SetGauge implements gometrics.MetricSink; raft's gauges are not
// exported (the group collector reads the same facts per group).
func (s *raftSink) SetGauge([]string, float32) {}

// SetGaugeWithLabels implements gometrics.MetricSink.
func (s *raftSink) SetGaugeWithLabels([]string, float32, []gometrics.Label) {}

// EmitKey implements gometrics.MetricSink.
func (s *raftSink) EmitKey([]string, float32) {}

// IncrCounter implements gometrics.MetricSink.
func (s *raftSink) IncrCounter(key []string, val float32) { s.observe(key, val, nil) }

// IncrCounterWithLabels implements gometrics.MetricSink.
func (s *raftSink) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	s.observe(key, val, labels)
}

// AddSample implements gometrics.MetricSink.
func (s *raftSink) AddSample(key []string, val float32) { s.observe(key, val, nil) }

// AddSampleWithLabels implements gometrics.MetricSink.
func (s *raftSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	s.observe(key, val, labels)
}

// labelValue makes s a label value without spaces or other characters a
// query would need to quote: anything outside [A-Za-z0-9_.:-] becomes '_',
// and it is cut at 128 bytes.
func labelValue(s string) string {
	if len(s) > 128 {
		s = s[:128]
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == ':', r == '-':
			return r
		}
		return '_'
	}, s)
}
