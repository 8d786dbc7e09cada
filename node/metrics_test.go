package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"
)

// scrape fetches and parses a node's /metrics.
func scrape(t *testing.T, nd *Node) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+nd.HTTPAddr()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+dashAdminSecret) // ignored where tokens are off
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

func gaugeOf(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	m := metricOf(fams, name, labels)
	return m.GetGauge().GetValue(), m != nil
}

func counterOf(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	m := metricOf(fams, name, labels)
	return m.GetCounter().GetValue(), m != nil
}

// metricOf returns the first series of name whose labels include labels.
func metricOf(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

// /metrics carries raft's own timings, per-group state, storage sizes,
// consumers and dead-letter age; every family has help text of its own and
// no label value holds a space.
func TestMetrics_RaftStorageConsumersAndDeadAge(t *testing.T) {
	nd := startLoneNode(t, 1)
	waitMetaLeader(t, nd)
	createQueueOn(t, nd, "jobs", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, []string{nd.ClientAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := c.Queue("jobs")
	if _, err := q.Send(ctx, client.Message{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Receive(ctx, client.ReceiveOptions{Max: 1, Wait: 5 * time.Second, Consumer: "worker-1"})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v %d", err, len(ds))
	}
	if err := ds[0].Reject(ctx, "bad input"); err != nil {
		t.Fatal(err)
	}
	part := map[string]string{"queue": "jobs", "partition": "0"}
	testwait.Until(t, 10*time.Second, "oldest dead age > 0", func() bool {
		v, ok := gaugeOf(scrape(t, nd), "ferry_partition_oldest_dead_age_seconds", part)
		return ok && v > 0
	})
	fams := scrape(t, nd)
	if v, _ := gaugeOf(fams, "ferry_partition_consumers", part); v != 1 {
		t.Errorf("consumers = %v, want 1", v)
	}
	if v, ok := gaugeOf(fams, "ferry_raft_leader_is_local", map[string]string{"group": "meta"}); !ok || v != 1 {
		t.Errorf("meta leader_is_local = %v %v, want 1", v, ok)
	}
	if v, ok := gaugeOf(fams, "ferry_raft_leader_is_local", part); !ok || v != 1 {
		t.Errorf("partition leader_is_local = %v %v, want 1", v, ok)
	}
	if v, _ := gaugeOf(fams, "ferry_wal_disk_bytes", nil); v <= 0 {
		t.Errorf("wal bytes = %v", v)
	}
	if v, _ := gaugeOf(fams, "ferry_raft_meta_log_bytes", nil); v <= 0 {
		t.Errorf("meta log bytes = %v", v)
	}
	for _, name := range []string{"ferry_raft_commit_seconds", "ferry_raft_fsm_apply_batch_seconds", "ferry_raft_applies_total"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
	if v, ok := gaugeOf(fams, "ferry_raft_snapshot_age_seconds", map[string]string{"group": "meta"}); ok && v < 0 {
		t.Errorf("snapshot age %v", v)
	}
	assertMetricHygiene(t, fams)
}

// TestMetrics_Schedules checks the schedule metrics of a partition that
// has a schedule: its count, its fired ticks and how overdue its next tick
// is (a fraction of a second on a leader that fires them).
func TestMetrics_Schedules(t *testing.T) {
	nd := startLoneNode(t, 1)
	waitMetaLeader(t, nd)
	createQueueOn(t, nd, "cron", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, []string{nd.ClientAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	part := map[string]string{"queue": "cron", "partition": "0"}
	if _, ok := gaugeOf(scrape(t, nd), "ferry_partition_schedules", part); ok {
		t.Fatal("schedule metrics for a partition without schedules")
	}
	if _, err := c.CreateSchedule(ctx, "cron", client.Schedule{Name: "tick", Every: time.Second, Body: []byte("t")}); err != nil {
		t.Fatal(err)
	}
	fired := map[string]string{"queue": "cron", "partition": "0", "outcome": "fired"}
	testwait.Until(t, 10*time.Second, "a fired tick counted", func() bool {
		v, ok := counterOf(scrape(t, nd), "ferry_partition_schedule_ticks_total", fired)
		return ok && v >= 1
	})
	fams := scrape(t, nd)
	if v, _ := gaugeOf(fams, "ferry_partition_schedules", part); v != 1 {
		t.Errorf("schedules = %v, want 1", v)
	}
	if v, ok := gaugeOf(fams, "ferry_partition_schedule_overdue_seconds", part); !ok || v > 2 {
		t.Errorf("overdue = %v %v, want under 2 s", v, ok)
	}
	assertMetricHygiene(t, fams)
}

func assertMetricHygiene(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	helps := map[string]string{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "ferry_") {
			continue
		}
		h := f.GetHelp()
		if h == "" || h == name {
			t.Errorf("%s: no help text of its own", name)
		}
		if other, dup := helps[h]; dup {
			t.Errorf("%s and %s share help %q", name, other, h)
		}
		helps[h] = name
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.ContainsAny(l.GetValue(), " \t") {
					t.Errorf("%s{%s=%q}: label value with a space", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	if fams["ferry_requests_total"] == nil {
		t.Error("ferry_requests_total missing")
	}
}

// Every ferry_ metric a node serves, and every raft metric it may serve,
// is in docs/metrics.md.
func TestMetrics_DocumentedInDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	nd := startLoneNode(t, 1)
	waitMetaLeader(t, nd)
	createQueueOn(t, nd, "jobs", 1)
	names := []string{}
	for name := range scrape(t, nd) {
		names = append(names, name)
	}
	for _, d := range raftMetricDefs {
		names = append(names, d.name)
	}
	for _, name := range names {
		if strings.HasPrefix(name, "ferry_") && !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s is not in docs/metrics.md", name)
		}
	}
}

// The sample alert rules load in promtool, which ships with Prometheus,
// and pass their unit tests.
func TestMetrics_AlertRulesPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("SKIPPED LOUDLY: promtool not installed (Debian package prometheus); alert rules not checked")
	}
	out, err := exec.Command(promtool, "check", "rules", "../docs/ferry-alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool said:\n%s", out)
	}
	// The rules' own unit tests: each alert fires on the series it is
	// about, with the labels and text it promises.
	out, err = exec.Command(promtool, "test", "rules", "../docs/ferry-alerts.test.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// On a 3-node cluster: every raft group has exactly one node reporting
// leader_is_local 1 (what the no-leader alert sums), and leaders report
// replication timings per follower under the follower's id.
func TestMetrics_ThreeNodeGroupsAndReplication(t *testing.T) {
	dc := startDashCluster(t)
	ids := map[string]bool{}
	for _, nd := range dc.nodes {
		ids[nd.ID()] = true
	}
	testwait.Until(t, 15*time.Second, "one leader per group across the nodes", func() bool {
		leaders := map[string]float64{}
		groups := 0
		for _, nd := range dc.nodes {
			f := scrape(t, nd)["ferry_raft_leader_is_local"]
			if f == nil {
				return false
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "group" {
						leaders[l.GetValue()] += m.GetGauge().GetValue()
					}
				}
			}
			groups = max(groups, len(f.GetMetric()))
		}
		for _, n := range leaders {
			if n != 1 {
				return false
			}
		}
		return len(leaders) == 3 && groups == 3 // meta and the 2 partitions of orders, on every node
	})
	for _, nd := range dc.nodes { // every node serves a request, so every node counts one
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := client.Dial(ctx, []string{nd.ClientAddr()}, client.WithToken(dashAdminSecret))
		if err == nil {
			_, err = c.ListQueues(ctx, "")
			c.Close()
		}
		cancel()
		if err != nil {
			t.Fatalf("list queues through %s: %v", nd.ID(), err)
		}
	}
	peers := map[string]bool{}
	for _, nd := range dc.nodes {
		fams := scrape(t, nd)
		assertMetricHygiene(t, fams)
		for _, m := range fams["ferry_raft_replication_append_seconds"].GetMetric() {
			for _, l := range m.GetLabel() {
				peers[l.GetValue()] = true
			}
		}
	}
	// raft's metrics are process-wide: earlier tests' nodes may show too.
	followers := 0
	for id := range ids {
		if peers[id] {
			followers++
		}
	}
	if followers < 2 {
		t.Errorf("replication timings for peers %v, want at least two of this cluster's nodes %v", peers, ids)
	}
}

// The consumer tracker counts distinct ids within the window and stays
// within its bounds.
func TestConsumerTracker_WindowAndBounds(t *testing.T) {
	tr := newConsumerTracker()
	t0 := time.Unix(1000, 0)
	tr.saw("q", 0, "a", t0)
	tr.saw("q", 0, "a", t0.Add(time.Second))
	tr.saw("q", 0, "b", t0)
	tr.saw("q", 0, "", t0) // anonymous receivers are not counted
	if n := tr.count("q", 0, t0.Add(time.Second)); n != 2 {
		t.Fatalf("count = %d, want 2", n)
	}
	if n := tr.count("q", 0, t0.Add(consumerWindow+500*time.Millisecond)); n != 1 {
		t.Fatalf("after b aged out: %d, want 1", n)
	}
	for i := 0; i < consumersPerPartitionMax+10; i++ {
		tr.saw("q", 1, fmt.Sprintf("c%d", i), t0)
	}
	if n := tr.count("q", 1, t0); n != consumersPerPartitionMax {
		t.Fatalf("%d consumers kept, at most %d", n, consumersPerPartitionMax)
	}
	for i := 0; i < consumerPartitionsMax+10; i++ {
		tr.saw(fmt.Sprintf("q%d", i), 0, "a", t0)
	}
	tr.mu.Lock()
	n := len(tr.seen)
	tr.mu.Unlock()
	if n > consumerPartitionsMax {
		t.Fatalf("%d partitions tracked, at most %d", n, consumerPartitionsMax)
	}
}
