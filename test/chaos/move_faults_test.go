package chaos

import (
	"strings"
	"testing"
)

// The sampler counts as caught up only voters that do not abstain and are
// within caughtUpSlack entries of the leader, counts them against the
// leader's latest voters when it lists them, and judges only partitions
// with an agreed leader and answers of one moment.
func TestMajorityDip(t *testing.T) {
	p := PartRef{"orders", 0}
	rep := func(node, role, suffrage string, applied uint64, abstaining bool) nodeReplica {
		return nodeReplica{node, ReplicaStatus{Queue: "orders", Role: role, Leader: "n1", AppliedIndex: applied,
			Suffrage: suffrage, Abstaining: abstaining}}
	}
	leaderOf := func(node string, applied uint64, voters ...string) nodeReplica {
		r := rep(node, "leader", "voter", applied, false)
		r.Voters = voters
		return r
	}
	target := []string{"n1", "n2", "n4"}
	cases := []struct {
		name string
		v    view
		dip  bool
	}{
		{"two caught-up voters", view{p: {rep("n1", "leader", "voter", 10000, false), rep("n2", "follower", "voter", 9990, false),
			rep("n4", "follower", "nonvoter", 3, false)}}, false},
		{"a voter promoted with an empty log", view{p: {rep("n1", "leader", "voter", 10000, false), rep("n4", "follower", "voter", 3, false)}}, true},
		{"an abstaining voter", view{p: {rep("n1", "leader", "voter", 10000, false), rep("n2", "follower", "voter", 10000, true)}}, true},
		{"a learner", view{p: {rep("n1", "leader", "voter", 10000, false), rep("n4", "follower", "nonvoter", 10000, false)}}, true},
		{"no agreed leader", view{p: {rep("n1", "follower", "voter", 10000, false)}}, false},
		// The leader commits against n1,n2,n3: n4 joining as a learner
		// and n2 down leave two of three.
		{"mid-move, a target replica down", view{p: {leaderOf("n1", 10000, "n1", "n2", "n3"),
			rep("n3", "follower", "voter", 10000, false), rep("n4", "follower", "nonvoter", 9999, false)}}, false},
		// n4 promoted by the leader, its own configuration one entry behind.
		{"promoted, own view trailing", view{p: {leaderOf("n1", 10000, "n1", "n2", "n4"),
			rep("n4", "follower", "nonvoter", 9999, false)}}, false},
		// n3 removed before n4 was promoted: the leader commits against
		// n1,n2 and n2 is down.
		{"removed too early", view{p: {leaderOf("n1", 10000, "n1", "n2"), rep("n4", "follower", "nonvoter", 10000, false)}}, true},
		{"promoted abstaining", view{p: {leaderOf("n1", 10000, "n1", "n2", "n4"),
			rep("n4", "follower", "voter", 10000, true)}}, true},
		// n3 answered well after the leader: not one moment, not judged.
		{"answers of different moments", view{p: {leaderOf("n1", 10000, "n1", "n2", "n3"),
			rep("n3", "follower", "none", 10100, false)}}, false},
	}
	for _, tc := range cases {
		got := tc.v.majorityDip(p, target)
		if (got != "") != tc.dip {
			t.Errorf("%s: dip %q, want a dip: %v", tc.name, got, tc.dip)
		}
		if tc.dip && !strings.Contains(got, "needed of voters") {
			t.Errorf("%s: %q does not say what was needed", tc.name, got)
		}
	}
}

// A partition has recovered only when every placed replica votes: a
// learner being rebuilt, or a replica abstaining, keeps it from surviving
// one more node loss; a leaving replica outside the placement is not
// judged, and the leader's voters win over a replica's own trailing view.
func TestNotVoting(t *testing.T) {
	p := PartRef{"orders", 0}
	rep := func(node, suffrage string, abstaining bool, voters ...string) nodeReplica {
		return nodeReplica{node, ReplicaStatus{Queue: "orders", Suffrage: suffrage, Abstaining: abstaining, Voters: voters}}
	}
	placed := []string{"n1", "n2", "n3"}
	cases := []struct {
		name    string
		v       view
		problem string // a part of the problem, "" when whole
	}{
		{"all voting", view{p: {rep("n1", "voter", false), rep("n2", "voter", false), rep("n3", "voter", false)}}, ""},
		{"a rebuilt learner", view{p: {rep("n1", "voter", false), rep("n2", "voter", false), rep("n3", "nonvoter", false)}},
			"n3 does not vote yet"},
		{"an abstaining voter", view{p: {rep("n1", "voter", false), rep("n2", "voter", true), rep("n3", "voter", false)}},
			"n2 abstains"},
		{"a leaving learner outside the placement", view{p: {rep("n1", "voter", false), rep("n2", "voter", false),
			rep("n3", "voter", false), rep("n4", "nonvoter", false)}}, ""},
		{"promoted by the leader, own view trailing", view{p: {rep("n1", "voter", false, "n1", "n2", "n3"),
			rep("n2", "voter", false), rep("n3", "nonvoter", false)}}, ""},
		{"demoted by the leader", view{p: {rep("n1", "voter", false, "n1", "n2"),
			rep("n2", "voter", false), rep("n3", "voter", false)}}, "n3 does not vote yet"},
	}
	for _, c := range cases {
		got := c.v.notVoting(p, "n1", placed)
		if (c.problem == "") != (got == "") || !strings.Contains(got, c.problem) {
			t.Errorf("%s: got %q, want a problem containing %q", c.name, got, c.problem)
		}
	}
}
