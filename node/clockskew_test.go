package node

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/clock"
	"github.com/ferrymq/ferry/internal/diskfault"
	"github.com/ferrymq/ferry/internal/testwait"
)

func TestClockMonitor_JudgesAgainstTheMajority(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name     string
		offsets  []time.Duration // peers' clocks minus this node's
		members  int
		known    bool
		exceeded bool
	}{
		{"in step", []time.Duration{10 * time.Millisecond, -20 * time.Millisecond}, 3, true, false},
		{"this node an hour ahead", []time.Duration{-time.Hour, -time.Hour}, 3, true, true},
		{"this node an hour behind", []time.Duration{time.Hour, time.Hour + time.Second}, 3, true, true},
		{"one peer off", []time.Duration{time.Hour, 0}, 3, true, false},
		{"split evenly: not judged wrong", []time.Duration{time.Hour}, 2, true, false},
		{"five nodes, two peers off", []time.Duration{time.Hour, time.Hour, 0, 0}, 5, true, false},
		{"five nodes, this node off", []time.Duration{time.Hour, time.Hour, time.Hour, 0}, 5, true, true},
		{"too few peers measured", []time.Duration{time.Hour}, 5, false, false},
		{"nobody measured", nil, 3, false, false},
		{"off by less than the round-trip error", []time.Duration{-900 * time.Millisecond, -900 * time.Millisecond}, 3, true, false},
	}
	for _, tc := range cases {
		m := newClockMonitor("me", DefaultMaxClockOffset, nil, nil)
		for i, off := range tc.offsets {
			peer := string(rune('a' + i))
			m.record(peer, clockSample{offset: off + time.Hour, rtt: time.Millisecond, at: now.Add(-time.Second)}) // older
			m.record(peer, clockSample{offset: off, rtt: time.Second, at: now})
		}
		st := m.judge(now.Add(-time.Millisecond), tc.members)
		if st.known != tc.known || st.exceeded != tc.exceeded {
			t.Errorf("%s: known %v exceeded %v (offset %v), want %v %v", tc.name, st.known, st.exceeded, st.offset, tc.known, tc.exceeded)
		}
		if stale := m.judge(now, tc.members); stale.known {
			t.Errorf("%s: judged on samples older than since", tc.name)
		}
	}
}

// The nodes measure each other on gossip pings; a node whose clock is off
// the majority's gives up the meta leadership and says so in /readyz and
// its metrics.
func TestClockMonitor_OffsetNodeGivesUpLeadership(t *testing.T) {
	nodes := testNodes(t, 3)
	testwait.Until(t, 20*time.Second, "every node to measure both peers' clocks", func() bool {
		for _, nd := range nodes {
			st := nd.clock.judge(time.Now().Add(-clockSampleMaxAge), 3)
			if !st.known || st.peers != 2 || st.exceeded {
				return false
			}
		}
		return true
	})
	leader := metaLeader(t, nodes)
	// The peers seem an hour ahead: this node's clock is an hour behind.
	// Readings stamped in the future stay the latest.
	for _, nd := range nodes {
		if nd != leader {
			for range clockSamplesKept {
				leader.clock.record(nd.cfg.ID, clockSample{offset: time.Hour, at: time.Now().Add(time.Hour)})
			}
		}
	}
	testwait.Until(t, 15*time.Second, "the offset node to give up the meta leadership", func() bool {
		return !leader.meta.isLeader() && metaLeaderID(nodes) != "" && metaLeaderID(nodes) != leader.cfg.ID
	})
	resp, err := http.Get("http://" + leader.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "max-clock-offset") {
		t.Fatalf("/readyz of the offset node: %d %q", resp.StatusCode, body)
	}
	if v := metricValue(leader.HTTPAddr(), "ferry_clock_offset_exceeded"); v != "1" {
		t.Fatalf("ferry_clock_offset_exceeded = %q, want 1", v)
	}
	if v := metricValue(leader.HTTPAddr(), "ferry_clock_offset_seconds"); !strings.HasPrefix(v, "-3600") && !strings.HasPrefix(v, "-3599") {
		t.Fatalf("ferry_clock_offset_seconds = %q, want about -3600", v)
	}
}

// A resync needs a strict majority of the cluster agreeing with this
// node's clock: one peer in step out of two measured verifies in a cluster
// of three, a split does not (the judgement above lets it pass).
func TestClockMonitor_VerificationNeedsAMajorityAgreeing(t *testing.T) {
	now := time.Now()
	m := newClockMonitor("me", DefaultMaxClockOffset, nil, nil)
	m.record("a", clockSample{offset: -time.Hour, at: now})
	if got := m.agreeing(now.Add(-time.Second)); got != 1 {
		t.Fatalf("one peer an hour off: %d agreeing, want 1 (this node)", got)
	}
	if st := m.judge(now.Add(-time.Second), 3); st.exceeded {
		t.Fatal("judged wrong on a split")
	}
	m.record("b", clockSample{offset: 3 * time.Millisecond, at: now})
	if got := m.agreeing(now.Add(-time.Second)); got != 2 {
		t.Fatalf("one peer in step: %d agreeing, want 2", got)
	}
	if got := m.agreeing(now); got != 0+1 {
		t.Fatalf("nothing measured after since: %d agreeing, want 1", got)
	}
}

func metaLeaderID(nodes []*Node) string {
	for _, nd := range nodes {
		if nd.meta.isLeader() {
			return nd.cfg.ID
		}
	}
	return ""
}

// A release build has no clock control: the chaos suite's endpoint is
// absent and the clock cannot be shifted. (With -tags chaosclock the
// endpoint shifts the clock.)
func TestNode_ClockControlOnlyInChaosBuilds(t *testing.T) {
	nd := startLoneNode(t, 1)
	resp, err := http.Post("http://"+nd.HTTPAddr()+"/v1/debug/clock?offset=1h", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	defer clock.Shift(0)
	if !clock.Adjustable {
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("release build: clock control answered %d %q", resp.StatusCode, body)
		}
		if clock.Offset() != 0 || time.Until(clock.Now()).Abs() > time.Second {
			t.Fatal("release build: the clock moved")
		}
		return
	}
	if resp.StatusCode != http.StatusOK || clock.Offset() != time.Hour {
		t.Fatalf("chaos build: clock control answered %d %q, offset %v", resp.StatusCode, body, clock.Offset())
	}
}

// Likewise the disk fault control: absent from a release build.
func TestNode_DiskFaultControlOnlyInChaosBuilds(t *testing.T) {
	nd := startLoneNode(t, 1)
	resp, err := http.Post("http://"+nd.HTTPAddr()+"/v1/debug/disk?match=raftlog&syncs=1", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	defer diskfault.Arm("", 0)
	if !diskfault.Armable {
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("release build: disk fault control answered %d %q", resp.StatusCode, body)
		}
		if diskfault.Remaining() != 0 {
			t.Fatal("release build: a fault was armed")
		}
		return
	}
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "1" {
		t.Fatalf("chaos build: disk fault control answered %d %q", resp.StatusCode, body)
	}
	// The kind parameter arms write faults; an unknown kind is refused.
	// The match names no file, so nothing fires meanwhile.
	for _, tc := range []struct {
		query  string
		status int
		left   string
	}{
		{"match=/no-such-dir/&kind=write&count=2", http.StatusOK, "2"},
		{"match=/no-such-dir/&kind=short-write&count=3", http.StatusOK, "3"},
		{"match=/no-such-dir/&kind=torn&count=1", http.StatusBadRequest, ""},
		{"match=/no-such-dir/&kind=write&count=0", http.StatusOK, "0"},
	} {
		resp, err := http.Post("http://"+nd.HTTPAddr()+"/v1/debug/disk?"+tc.query, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || (tc.left != "" && strings.TrimSpace(string(body)) != tc.left) {
			t.Fatalf("chaos build: %s answered %d %q, want %d %q", tc.query, resp.StatusCode, body, tc.status, tc.left)
		}
	}
}
