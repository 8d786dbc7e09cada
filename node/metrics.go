package node

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/connlimit"
	"github.com/ferrymq/ferry/transport"
	"github.com/ferrymq/ferry/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics holds the node's Prometheus registry: request counts and
// latencies by op and result code, and the state of every partition this
// node leads, read at scrape time.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// acceptErrors counts failed accepts of client connections,
	// connsRefused connections refused at a connection limit, connsClosed
	// connections the node cut (idle, frame_timeout, write_timeout,
	// unauthorized: a missing or unknown token at the hello).
	acceptErrors prometheus.Counter
	connsRefused prometheus.Counter
	connsClosed  *prometheus.CounterVec
	// served caches, per op, the series of its successful requests, so
	// the common case does not look labels up per request (that lookup
	// hashes the label values under a lock); filled on first use, so ops
	// never served export nothing.
	served [256]atomic.Pointer[opSeries]
}

// opSeries are the series one op's successful requests update.
type opSeries struct {
	ok      prometheus.Counter
	latency prometheus.Observer
}

// newMetrics builds the node's registry: request counts and latencies,
// client connection counters, the HTTP, raft connection, raft group,
// cluster shape, clock and partition collectors, and Go's runtime and
// process collectors.
func newMetrics(n *Node) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ferry_requests_total", Help: "Client requests served, by op and result code.",
		}, []string{"op", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ferry_request_seconds", Help: "Client request latency by op (long-polls included).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"op"}),
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ferry_client_accept_errors_total", Help: "Failed accepts of client connections (out of file descriptors and the like).",
		}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ferry_client_connections_refused_total", Help: "Client connections refused at the node or per-address connection limit.",
		}),
		connsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ferry_client_connections_cut_total", Help: "Client connections the node closed, by reason (idle, frame_timeout, write_timeout, unauthorized).",
		}, []string{"reason"}),
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ferry_client_connections", Help: "Client connections served now.",
	}, func() float64 {
		if n.clients == nil {
			return 0
		}
		return float64(n.clients.count())
	})
	m.registry.MustRegister(m.acceptErrors, m.connsRefused, m.connsClosed, open)
	m.registry.MustRegister(connlimit.Metrics("ferry_http_connections", "HTTP admin", n.httpConnCounts)...)
	m.registry.MustRegister(raftConnCollectors(n.RaftConnections)...)
	m.registry.MustRegister(processRaftSink(), groupCollector{n}, shapeCollector{n})
	m.registry.MustRegister(clockCollectors(n.clock)...)
	m.registry.MustRegister(m.requests, m.latency, partitionCollector{n},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observe counts one answered request and its latency. Successful
// requests go through the op's cached series; failures look their labels
// up each time.
func (m *metrics) observe(op wire.Op, code wire.Code, elapsed time.Duration) {
	if code != wire.CodeOK {
		m.requests.WithLabelValues(opLabel(op), codeLabel(code)).Inc()
		m.latency.WithLabelValues(opLabel(op)).Observe(elapsed.Seconds())
		return
	}
	s := m.served[op].Load()
	if s == nil {
		s = &opSeries{ok: m.requests.WithLabelValues(opLabel(op), codeLabel(code)),
			latency: m.latency.WithLabelValues(opLabel(op))}
		m.served[op].Store(s) // a racing first use stores the same series
	}
	s.ok.Inc()
	s.latency.Observe(elapsed.Seconds())
}

// Label values of ops and codes: their names in snake case ("not_leader",
// "create_queue"), computed once.
var (
	opLabels   [256]string
	codeLabels [64]string
)

// init fills opLabels and codeLabels.
func init() {
	for i := range opLabels {
		opLabels[i] = snakeLabel(wire.Op(i).String())
	}
	for i := range codeLabels {
		codeLabels[i] = snakeLabel(wire.Code(i).String())
	}
}

// opLabel returns op's metric label.
func opLabel(op wire.Op) string { return opLabels[uint8(op)] }

// codeLabel returns c's metric label; a code beyond the table is computed.
func codeLabel(c wire.Code) string {
	if int(c) < len(codeLabels) {
		return codeLabels[c]
	}
	return snakeLabel(c.String())
}

// snakeLabel is labelValue with '-' and every other separator as '_'.
func snakeLabel(s string) string {
	return strings.ReplaceAll(labelValue(s), "-", "_")
}

// handler serves the registry in Prometheus' text format (/metrics).
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

var (
	partLabels  = []string{"queue", "partition"}
	gaugeDescs  = map[string]*prometheus.Desc{}
	gaugeNames  = []string{"ready", "eligible", "delayed", "in_flight", "dead", "bytes", "dead_bytes"}
	counterDesc = prometheus.NewDesc("ferry_partition_events_total", "Partition events since the queue was created, by kind.",
		append(partLabels, "event"), nil)
	ageDesc     = prometheus.NewDesc("ferry_partition_oldest_eligible_age_seconds", "Age of the oldest message waiting to be received.", partLabels, nil)
	deadAgeDesc = prometheus.NewDesc("ferry_partition_oldest_dead_age_seconds",
		"Time since the oldest dead letter of the partition was dead-lettered (0 when there is none).", partLabels, nil)
	schedulesDesc = prometheus.NewDesc("ferry_partition_schedules",
		"Recurring schedules of the partition (reported only for partitions that have some).", partLabels, nil)
	scheduleTicksDesc = prometheus.NewDesc("ferry_partition_schedule_ticks_total",
		"Ticks of the partition's schedules, by outcome: fired (sent its message), refused (the queue refused it), "+
			"skipped (missed whole while no leader ran them). Deleting a schedule takes its counts away.",
		append(partLabels, "outcome"), nil)
	scheduleOverdueDesc = prometheus.NewDesc("ferry_partition_schedule_overdue_seconds",
		"How far the leader's clock is past the partition's earliest schedule tick (0 when none is due); "+
			"more than a second or two means ticks are not firing.", partLabels, nil)
	pausedDesc = prometheus.NewDesc("ferry_partition_paused",
		"1 while the partition's deliveries are paused (receives lease nothing), else 0.", partLabels, nil)
	receivesDesc = prometheus.NewDesc("ferry_partition_receives_waiting",
		"Receives in progress at the partition's leader: long polls waiting for messages and receives being applied.", partLabels, nil)
	consumersDesc = prometheus.NewDesc("ferry_partition_consumers",
		"Distinct consumer ids that received from the partition in the last minute (counted by its leader).", partLabels, nil)
	gaugeHelp = map[string]string{
		"ready":      "Messages visible and not leased, including those waiting behind an earlier message of their group.",
		"eligible":   "Ready messages a receive could lease right now.",
		"delayed":    "Messages waiting for their delay or retry backoff to end.",
		"in_flight":  "Messages leased to a consumer and not yet settled.",
		"dead":       "Dead letters held by the partition.",
		"bytes":      "Stored bytes of the messages not acked or dead-lettered.",
		"dead_bytes": "Stored bytes of the dead letters.",
	}
)

// init builds the descriptors of the partition gauges.
func init() {
	for _, name := range gaugeNames {
		gaugeDescs[name] = prometheus.NewDesc("ferry_partition_"+name, gaugeHelp[name]+" Reported by the partition leader.", partLabels, nil)
	}
}

// partitionCollector reports the partitions this node leads.
type partitionCollector struct{ src partitionSource }

// partitionSource is what partitionCollector reads of its node.
type partitionSource interface {
	// ledPartitions returns the partitions the node leads now, with
	// their state.
	ledPartitions() []ledPartition
	// consumerCount counts the consumers that received from a partition
	// in the last minute.
	consumerCount(queue string, index int, now time.Time) int
}

// ledPartition is one partition a node leads and its state.
type ledPartition struct {
	queue string
	index int
	stats fsm.Stats
	// receives counts the receives in progress at the leader (long polls
	// waiting included).
	receives int64
}

// ledPartitions implements partitionSource.
func (n *Node) ledPartitions() []ledPartition {
	if n.replicas == nil {
		return nil
	}
	var out []ledPartition
	for _, r := range n.replicas.all() {
		if r.p.IsLeader() {
			out = append(out, ledPartition{queue: r.a.Queue, index: r.a.Index, stats: r.p.Stats(), receives: r.p.ReceivesWaiting()})
		}
	}
	return out
}

// consumerCount implements partitionSource.
func (n *Node) consumerCount(queue string, index int, now time.Time) int {
	return n.consumers.count(queue, index, now)
}

// Describe implements prometheus.Collector.
func (c partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range gaugeDescs {
		ch <- d
	}
	ch <- counterDesc
	ch <- ageDesc
	ch <- deadAgeDesc
	ch <- consumersDesc
	ch <- receivesDesc
	ch <- pausedDesc
	ch <- schedulesDesc
	ch <- scheduleTicksDesc
	ch <- scheduleOverdueDesc
}

// Collect implements prometheus.Collector: the gauges, ages, consumer
// count and event counters of every partition this node leads, read from
// the leader's state at scrape time. Followers report nothing, so each
// partition has one series set.
func (c partitionCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, lp := range c.src.ledPartitions() {
		st := lp.stats
		labels := []string{lp.queue, itoa(lp.index)}
		values := []int64{st.Ready, st.Eligible, st.Delayed, st.InFlight, st.Dead, st.Bytes, st.DeadBytes}
		for i, name := range gaugeNames {
			ch <- prometheus.MustNewConstMetric(gaugeDescs[name], prometheus.GaugeValue, float64(values[i]), labels...)
		}
		ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, float64(st.OldestEligibleAge)/1e9, labels...)
		ch <- prometheus.MustNewConstMetric(deadAgeDesc, prometheus.GaugeValue, secondsSince(st.OldestDeadAt, now), labels...)
		ch <- prometheus.MustNewConstMetric(consumersDesc, prometheus.GaugeValue,
			float64(c.src.consumerCount(lp.queue, lp.index, now)), labels...)
		ch <- prometheus.MustNewConstMetric(receivesDesc, prometheus.GaugeValue, float64(lp.receives), labels...)
		paused := 0.0
		if st.Pause.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, paused, labels...)
		collectSchedules(ch, st.Schedules, labels, now)
		k := st.Counters
		for event, v := range map[string]uint64{
			"sent": k.Sent, "duplicate": k.Duplicates, "leased": k.Leased, "acked": k.Acked, "nacked": k.Nacked,
			"rejected": k.Rejected, "expired": k.Expired, "dead_lettered": k.DeadLettered, "redriven": k.Redriven,
			"dead_deleted": k.DeadDeleted, "purged": k.Purged, "retention_expired": k.RetentionExpired,
			"dead_evicted": k.DeadEvicted, "dead_expired": k.DeadExpired, "dedup_evicted": k.DedupEvicted,
		} {
			ch <- prometheus.MustNewConstMetric(counterDesc, prometheus.CounterValue, float64(v), append(labels, event)...)
		}
	}
}

// collectSchedules exports a partition's schedule totals, when it has
// schedules.
func collectSchedules(ch chan<- prometheus.Metric, t fsm.ScheduleTotals, labels []string, now time.Time) {
	if t.Count == 0 {
		return
	}
	ch <- prometheus.MustNewConstMetric(schedulesDesc, prometheus.GaugeValue, float64(t.Count), labels...)
	for outcome, v := range map[string]uint64{"fired": t.Fired, "refused": t.Refused, "skipped": t.Skipped} {
		ch <- prometheus.MustNewConstMetric(scheduleTicksDesc, prometheus.CounterValue, float64(v), append(labels, outcome)...)
	}
	ch <- prometheus.MustNewConstMetric(scheduleOverdueDesc, prometheus.GaugeValue, secondsSince(t.NextTick, now), labels...)
}

// secondsSince is how many seconds now is past at (Unix nanoseconds): 0
// when at is 0 or not yet reached.
func secondsSince(at int64, now time.Time) float64 {
	if at == 0 {
		return 0
	}
	return max(0, now.Sub(time.Unix(0, at)).Seconds())
}

// clockCollectors export the clock monitor's judgement: this node's offset
// from the majority, whether it is beyond -max-clock-offset, and the
// leadership hand-overs made for it (zeros when m is nil).
func clockCollectors(m *clockMonitor) []prometheus.Collector {
	read := func(f func(st clockState, transfers uint64) float64) func() float64 {
		return func() float64 {
			if m == nil {
				return 0
			}
			st, tr := m.current()
			return f(st, tr)
		}
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ferry_clock_offset_seconds", Help: "This node's clock minus the majority's (median of the offsets measured on gossip pings).",
		}, read(func(st clockState, _ uint64) float64 { return st.offset.Seconds() })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ferry_clock_offset_exceeded", Help: "1 while the clock offset is beyond -max-clock-offset: the node leads nothing and refuses commands.",
		}, read(func(st clockState, _ uint64) float64 {
			if st.exceeded {
				return 1
			}
			return 0
		})),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ferry_clock_leadership_transfers_total", Help: "Leaderships this node gave up because its clock offset was beyond -max-clock-offset.",
		}, read(func(_ clockState, tr uint64) float64 { return float64(tr) })),
	}
}

// raftConnCollectors export the raft port's connections, as stats reads
// them at scrape time: open ones by state, and those closed at the
// handshake by reason.
func raftConnCollectors(stats func() transport.Stats) []prometheus.Collector {
	stat := func(f func(transport.Stats) float64) func() float64 {
		return func() float64 { return f(stats()) }
	}
	gauge := func(state string, f func(transport.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ferry_raft_connections", Help: "Raft connections open now, by state (accepted, dialed, handshaking).",
			ConstLabels: prometheus.Labels{"state": state},
		}, stat(f))
	}
	refused := func(reason string, f func(transport.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ferry_raft_connections_refused_total", Help: "Accepted raft connections closed at the handshake, by reason (tls: no member certificate; busy: too many in handshake; header: a bad or late header or an unknown group).",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, stat(f))
	}
	return []prometheus.Collector{
		gauge("accepted", func(s transport.Stats) float64 { return float64(s.Accepted) }),
		gauge("dialed", func(s transport.Stats) float64 { return float64(s.Dialed) }),
		gauge("handshaking", func(s transport.Stats) float64 { return float64(s.Handshaking) }),
		refused("tls", func(s transport.Stats) float64 { return float64(s.TLSRefused) }),
		refused("busy", func(s transport.Stats) float64 { return float64(s.Busy) }),
		refused("header", func(s transport.Stats) float64 { return float64(s.Rejected - s.TLSRefused - s.Busy) }),
	}
}

// httpConnCounts reads the admin port's connection counts (zeros before
// the port is open).
func (n *Node) httpConnCounts() (open int, refused uint64) {
	if n.httpConns == nil {
		return 0, 0
	}
	return n.httpConns.Counts()
}

// RegisterMetrics adds collectors to the node's /metrics, for parts of the
// process that run beside the node (ferryd's SQS endpoint). It fails on a
// collector whose series the registry has already.
func (n *Node) RegisterMetrics(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := n.metrics.registry.Register(c); err != nil {
			return fmt.Errorf("node: registering metrics: %w", err)
		}
	}
	return nil
}
