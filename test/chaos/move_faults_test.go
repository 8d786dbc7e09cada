package chaos

import (
	"strings"
	"testing"
)

// The sampler counts as caught up only voters that do not abstain and are
// within caughtUpSlack entries of the leader, and judges only partitions
// with an agreed leader.
func TestMajorityDip(t *testing.T) {
	p := PartRef{"orders", 0}
	rep := func(node, role, suffrage string, applied uint64, abstaining bool) nodeReplica {
		return nodeReplica{node, ReplicaStatus{Queue: "orders", Role: role, Leader: "n1", AppliedIndex: applied,
			Suffrage: suffrage, Abstaining: abstaining}}
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
	}
	for _, tc := range cases {
		got := tc.v.majorityDip(p, target)
		if (got != "") != tc.dip {
			t.Errorf("%s: dip %q, want a dip: %v", tc.name, got, tc.dip)
		}
		if tc.dip && !strings.Contains(got, "2 needed of target [n1 n2 n4]") {
			t.Errorf("%s: %q does not say what was needed", tc.name, got)
		}
	}
}
