package node

import (
	"testing"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gatherSink collects s into name -> label value ("" without labels) ->
// sample count (histograms) or value (counters).
func gatherSink(t *testing.T, s *raftSink) map[string]map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, f := range fams {
		out[f.GetName()] = map[string]float64{}
		for _, m := range f.GetMetric() {
			label := ""
			for _, l := range m.GetLabel() {
				label = l.GetValue()
			}
			out[f.GetName()][label] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	if h := m.GetHistogram(); h != nil {
		return float64(h.GetSampleCount())
	}
	return m.GetCounter().GetValue()
}

// Raft's samples reach the exported series they name (by peer for peer
// metrics, with the peer id made a safe label value); other keys and
// negative counts are dropped; a sample of a known metric allocates
// nothing once its series is resolved.
func TestRaftSink_RecordsAllowedMetricsOnly(t *testing.T) {
	s := newRaftSink()
	peer := []gometrics.Label{{Name: "peer_id", Value: "node 2"}}
	s.AddSample([]string{"raft", "commitTime"}, 1.5)
	s.AddSample([]string{"raft", "commitTime"}, 2)
	s.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 0.7, peer)
	s.IncrCounterWithLabels([]string{"raft", "replication", "appendEntries", "logs"}, 9, peer)
	s.IncrCounterWithLabels([]string{"raft", "replication", "appendEntries", "logs"}, -3, peer)
	s.IncrCounter([]string{"raft", "apply"}, 4)
	s.AddSample([]string{"raft", "not", "exported"}, 1)
	got := gatherSink(t, s)
	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"ferry_raft_commit_seconds", "", 2},
		{"ferry_raft_replication_append_seconds", "node_2", 1},
		{"ferry_raft_replication_entries_total", "node_2", 9},
		{"ferry_raft_applies_total", "", 4},
	} {
		if v, ok := got[c.name][c.label]; !ok || v != c.want {
			t.Errorf("%s{%q} = %v (present %v), want %v", c.name, c.label, v, ok, c.want)
		}
	}
	want := 2 // the two peer metrics sampled; the others have no series until their first sample
	for _, d := range raftMetricDefs {
		if !d.peer {
			want++
		}
	}
	if len(got) != want {
		t.Errorf("%d families exported, want %d: %v", len(got), want, got)
	}
	total := 0.0
	for _, series := range got {
		for _, v := range series {
			total += v
		}
	}
	if total != 2+1+9+4 {
		t.Errorf("samples and counts add up to %v, want %v: something unexported was recorded", total, 2+1+9+4)
	}
	key := []string{"raft", "rpc", "appendEntries", "storeLogs"}
	if n := testing.AllocsPerRun(100, func() { s.AddSample(key, 0.2) }); n != 0 {
		t.Errorf("a sample allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { s.AddSampleWithLabels([]string{"raft", "replication", "heartbeat"}, 0.1, peer) }); n > 1 {
		t.Errorf("a peer sample allocates %v times", n)
	}
}
