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
