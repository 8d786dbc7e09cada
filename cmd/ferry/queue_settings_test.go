package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wire"
)

// TestCLI_QueueSettingsFromTheCluster: `queue settings` shows what the
// server reports, one entry per wire field, with fsm's defaults; and every
// setting has a create flag that reaches the server.
func TestCLI_QueueSettingsFromTheCluster(t *testing.T) {
	nd := startNode(t)
	addr := nd.ClientAddr()
	list, ok := cliJSON(t, addr, "queue", "settings").([]any)
	if !ok || len(list) != len(wire.ConfigFieldList()) {
		t.Fatalf("queue settings: %v", list)
	}
	vis := byKey(t, list, "name", "visibility_timeout")
	if vis["default"] != "30s" || vis["max"] != "12h0m0s" || vis["kind"] != "duration" {
		t.Errorf("visibility_timeout reported as %v", vis)
	}
	depth := byKey(t, list, "name", "max_depth")
	if depth["default"] != 0.0 || depth["zero"] != "no limit" || depth["max"] != nil {
		t.Errorf("max_depth reported as %v", depth)
	}
	table, err := runCLI(addr, "queue", "settings")
	if err != nil || !bytes.Contains(table, []byte("dedup_max_ids")) || !bytes.Contains(table, []byte("1000000")) {
		t.Fatalf("queue settings table (%v):\n%s", err, table)
	}

	// Every setting's flag, given a value unlike its default, arrives.
	args := []string{"queue", "create", "every-flag"}
	want := map[string]any{}
	for _, s := range fsm.Settings() {
		v := s.Default + 1
		if s.Max != 0 && v > s.Max {
			v = s.Default - 1
		}
		if s.Name == "backoff_max" {
			v = s.Max // above backoff_base's new value
		}
		args = append(args, "--"+flagName(s)+"="+s.Format(v))
		want[s.Name] = v
	}
	created := cliJSON(t, addr, args...).(map[string]any)
	cfg := created["config"].(map[string]any)
	for _, s := range fsm.Settings() {
		got := cfg[s.Name]
		if s.Kind == fsm.KindDuration {
			if got != durationString(want[s.Name].(int64)) {
				t.Errorf("%s: created with %v, want %v", s.Name, got, want[s.Name])
			}
			continue
		}
		if got != float64(want[s.Name].(int64)) {
			t.Errorf("%s: created with %v, want %v", s.Name, got, want[s.Name])
		}
	}
}

// durationString is how the JSON views write a duration of n nanoseconds.
func durationString(n int64) string { return time.Duration(n).String() }

// TestCLI_FairGroupsSwitch: --fair-groups alone turns fair delivery on at
// a create; --fair-groups=false turns it off at an update.
func TestCLI_FairGroupsSwitch(t *testing.T) {
	nd := startNode(t)
	addr := nd.ClientAddr()
	created := cliJSON(t, addr, "queue", "create", "tenants", "--fair-groups").(map[string]any)
	if got := created["config"].(map[string]any)["fair_groups"]; got != 1.0 {
		t.Fatalf("created with fair_groups %v", got)
	}
	if out, err := runCLI(addr, "queue", "update", "tenants", "--fair-groups=false"); err != nil {
		t.Fatalf("update: %v\n%s", err, out)
	}
	q := byKey(t, cliJSON(t, addr, "queue", "ls"), "name", "tenants")
	if got := q["config"].(map[string]any)["fair_groups"]; got != 0.0 {
		t.Fatalf("updated to fair_groups %v", got)
	}
	if out, err := runCLI(addr, "queue", "update", "tenants", "--fair-groups=maybe"); err == nil {
		t.Fatalf("--fair-groups=maybe accepted:\n%s", out)
	}
}
