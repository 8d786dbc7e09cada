package node

import (
	"github.com/ferrymq/ferry/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// shapeCollector exports the cluster's shape as this node's catalog sees
// it: under-replicated partitions, moves in progress, replicas, preferred
// and actual leaderships per node, draining nodes; and this node's own
// share of moving replicas (catch-ups it leads, snapshot bytes it sent).
type shapeCollector struct{ src shapeSource }

// shapeSource is what shapeCollector reads of its node; each part answers
// false until it runs.
type shapeSource interface {
	// shapeListing is the node listing of `ferry node ls`, once the meta
	// group and gossip run.
	shapeListing() (*wire.ListNodesResponse, bool)
	// catchUps counts the new replicas catching up in the partitions the
	// node leads.
	catchUps() (int, bool)
	// snapshotBytesSent is the snapshot bytes the node streamed to peers.
	snapshotBytesSent() (uint64, bool)
}

// shapeListing implements shapeSource.
func (n *Node) shapeListing() (*wire.ListNodesResponse, bool) {
	if n.meta == nil || n.members == nil {
		return nil, false
	}
	return n.listNodes(), true
}

// catchUps implements shapeSource.
func (n *Node) catchUps() (int, bool) {
	if n.mover == nil {
		return 0, false
	}
	return n.mover.CatchingUp(), true
}

// snapshotBytesSent implements shapeSource.
func (n *Node) snapshotBytesSent() (uint64, bool) {
	if n.raftNet == nil {
		return 0, false
	}
	return n.raftNet.Stats().SnapshotBytesSent, true
}

var (
	underReplicatedDesc = prometheus.NewDesc("ferry_cluster_partitions_under_replicated",
		"Partitions with fewer caught-up replicas than their queue asks for (the catalog as this node sees it).", nil, nil)
	movesDesc = prometheus.NewDesc("ferry_cluster_moves_in_progress",
		"Partitions with a replica move in progress (the catalog as this node sees it).", nil, nil)
	nodeReplicasDesc = prometheus.NewDesc("ferry_cluster_node_replicas",
		"Partition replicas placed on each node.", []string{"node"}, nil)
	nodePreferredDesc = prometheus.NewDesc("ferry_cluster_node_preferred_leaders",
		"Partitions whose preferred leader is each node.", []string{"node"}, nil)
	nodeLeadingDesc = prometheus.NewDesc("ferry_cluster_node_leading",
		"Raft groups each node leads now, by gossip's leader tables.", []string{"node"}, nil)
	nodeDrainingDesc = prometheus.NewDesc("ferry_cluster_node_draining",
		"1 while a node is draining.", []string{"node"}, nil)
	catchUpsDesc = prometheus.NewDesc("ferry_replica_catch_ups",
		"New replicas catching up in the partitions this node leads.", nil, nil)
	snapshotBytesDesc = prometheus.NewDesc("ferry_raft_snapshot_bytes_sent_total",
		"Snapshot bytes this node streamed to peers (rebuilding replicas).", nil, nil)
)

// Describe implements prometheus.Collector.
func (c shapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{underReplicatedDesc, movesDesc, nodeReplicasDesc, nodePreferredDesc,
		nodeLeadingDesc, nodeDrainingDesc, catchUpsDesc, snapshotBytesDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector, from this node's catalog and
// gossip; nothing before the meta group and gossip run.
func (c shapeCollector) Collect(ch chan<- prometheus.Metric) {
	l, ok := c.src.shapeListing()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(underReplicatedDesc, prometheus.GaugeValue, float64(l.UnderReplicatedTotal))
	ch <- prometheus.MustNewConstMetric(movesDesc, prometheus.GaugeValue, float64(l.MovesInFlight))
	for _, s := range l.Nodes {
		if s.Removed {
			continue // gone for good: no series of its own
		}
		draining := 0.0
		if s.Draining {
			draining = 1
		}
		ch <- prometheus.MustNewConstMetric(nodeReplicasDesc, prometheus.GaugeValue, float64(s.Replicas), s.ID)
		ch <- prometheus.MustNewConstMetric(nodePreferredDesc, prometheus.GaugeValue, float64(s.Leaders), s.ID)
		ch <- prometheus.MustNewConstMetric(nodeLeadingDesc, prometheus.GaugeValue, float64(s.Leading), s.ID)
		ch <- prometheus.MustNewConstMetric(nodeDrainingDesc, prometheus.GaugeValue, draining, s.ID)
	}
	if k, ok := c.src.catchUps(); ok {
		ch <- prometheus.MustNewConstMetric(catchUpsDesc, prometheus.GaugeValue, float64(k))
	}
	if sent, ok := c.src.snapshotBytesSent(); ok {
		ch <- prometheus.MustNewConstMetric(snapshotBytesDesc, prometheus.CounterValue, float64(sent))
	}
}
