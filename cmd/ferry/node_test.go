package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/internal/testwait"
)

// `ferry node remove` asks first, removes the node from the cluster (it
// disappears from `cluster status`), and a second removal fails.
func TestCLI_NodeRemove(t *testing.T) {
	cl := startCluster(t)
	cl.createQueue(t, "orders") // the cluster is formed and registered
	if r := ferry(t, cl.addrs[:2], "node", "remove", "n3"); r.code == 0 {
		t.Fatal("node remove without --yes and without a terminal succeeded")
	}
	var r result
	testwait.UntilNil(t, 20*time.Second, "node n3 removed", func() error {
		if r = ferry(t, cl.addrs[:2], "node", "remove", "n3", "--yes"); r.code != 0 {
			return fmt.Errorf("exit %d: %s", r.code, r.stderr)
		}
		return nil
	})
	if !strings.Contains(r.stdout, "node n3 removed; 0 replicas moved") {
		t.Fatalf("node remove: %q", r.stdout)
	}
	testwait.UntilNil(t, 20*time.Second, "n3 gone from cluster status", func() error {
		if st := ferry(t, cl.addrs[:2], "cluster", "status"); st.code != 0 || strings.Contains(st.stdout, "n3 ") {
			return fmt.Errorf("exit %d: %q", st.code, st.stdout)
		}
		return nil
	})
	if r := ferry(t, cl.addrs[:2], "node", "remove", "n3", "--yes"); r.code == 0 || !strings.Contains(r.stderr, "node not found") {
		t.Fatalf("second removal: exit %d, %q", r.code, r.stderr)
	}
	// node ls still names it, as removed for good.
	ls := ferry(t, cl.addrs[:2], "node", "ls", "--json")
	var v struct {
		Nodes []struct{ ID, Lifecycle string }
	}
	if ls.code != 0 || json.Unmarshal([]byte(ls.stdout), &v) != nil {
		t.Fatalf("node ls --json: exit %d, %q", ls.code, ls.stdout)
	}
	if !slices.ContainsFunc(v.Nodes, func(n struct{ ID, Lifecycle string }) bool { return n.ID == "n3" && n.Lifecycle == "removed" }) {
		t.Fatalf("node ls lists no removed n3: %q", ls.stdout)
	}
}
