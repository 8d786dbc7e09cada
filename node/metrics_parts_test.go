package node

import (
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeParts stands in for a node behind the collectors' interfaces.
type fakeParts struct {
	led     []ledPartition
	listing *wire.ListNodesResponse
}

func (f fakeParts) ledPartitions() []ledPartition { return f.led }
func (f fakeParts) consumerCount(queue string, index int, _ time.Time) int {
	return len(queue) + index
}
func (f fakeParts) shapeListing() (*wire.ListNodesResponse, bool) { return f.listing, f.listing != nil }
func (f fakeParts) catchUps() (int, bool)                         { return 3, true }
func (f fakeParts) snapshotBytesSent() (uint64, bool)             { return 0, false }

// gatherValues collects reg and returns each series' value by metric name
// and its label values joined by ",".
func gatherValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// The collectors read only what their interfaces give them: they run on a
// fake with no node behind it.
func TestMetrics_CollectorsReadTheirSourcesOnly(t *testing.T) {
	src := fakeParts{led: []ledPartition{{queue: "orders", index: 1, stats: fsm.Stats{Ready: 7}, receives: 5},
		{queue: "orders", index: 2, stats: fsm.Stats{Pause: fsm.PauseState{Paused: true, By: "oncall", At: 1}}}}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(partitionCollector{src}, shapeCollector{src})
	got := gatherValues(t, reg)
	if got["ferry_partition_ready{1,orders}"] != 7 || got["ferry_partition_consumers{1,orders}"] != 7 {
		t.Fatalf("partition series %v, want ready 7 and consumers 7 for orders/1", got)
	}
	if got["ferry_partition_receives_waiting{1,orders}"] != 5 {
		t.Fatalf("receives series %v, want 5 for orders/1", got)
	}
	if v, ok := got["ferry_partition_paused{1,orders}"]; !ok || v != 0 || got["ferry_partition_paused{2,orders}"] != 1 {
		t.Fatalf("paused series %v, want orders/1 at 0 and orders/2 at 1", got)
	}
	if _, ok := got["ferry_replica_catch_ups{}"]; ok {
		t.Fatal("shape reported before its listing is available")
	}
	src.listing = &wire.ListNodesResponse{Nodes: []wire.NodeStatus{{ID: "n1", Replicas: 2}}}
	reg = prometheus.NewRegistry()
	reg.MustRegister(shapeCollector{src})
	got = gatherValues(t, reg)
	_, sent := got["ferry_raft_snapshot_bytes_sent_total{}"]
	if got["ferry_replica_catch_ups{}"] != 3 || got["ferry_cluster_node_replicas{n1}"] != 2 || sent {
		t.Fatalf("shape series %v, want 3 catch-ups, 2 replicas on n1 and no snapshot bytes", got)
	}
}
