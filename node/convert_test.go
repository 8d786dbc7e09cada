package node

import (
	"fmt"
	"testing"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wal/raftlog"
	"github.com/ferrymq/ferry/wire"
)

// A command the leader could not write to its raft log reaches clients as
// unavailable (retryable, nothing done); one whose cut-back failed as a
// timeout (outcome unknown).
func TestCodeOf_RaftLogWriteErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want wire.Code
	}{
		{fmt.Errorf("partition q-0: %w: %w", partition.ErrIO, raftlog.ErrIO), wire.CodeUnavailable},
		{fmt.Errorf("partition q-0: %w: %w", partition.ErrIO, raftlog.ErrDiskFull), wire.CodeUnavailable},
		{fmt.Errorf("partition q-0: %w: %w", partition.ErrUnknownOutcome, raftlog.ErrFailed), wire.CodeTimeout},
	} {
		if got := codeOf(tc.err); got != tc.want {
			t.Fatalf("codeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if !tc.want.Retryable() {
			t.Fatalf("%v is not retryable", tc.want)
		}
	}
}

// TestQueueConfig_ConversionKeepsEverySetting converts a catalog config
// with every setting set to its own distinct value to the wire and back:
// a setting either side left out would come back 0.
func TestQueueConfig_ConversionKeepsEverySetting(t *testing.T) {
	c := meta.QueueConfig{Partitions: 3, Replicas: 2}
	for i, s := range fsm.Settings() {
		v := s.Max - int64(i)
		if s.Max == 0 {
			v = int64(1000 + i)
		}
		s.Set(&c.Queue, v)
	}
	w := queueConfigOf(c)
	for i, s := range fsm.Settings() {
		if w.Get(wireField(s.Name)) != s.Get(c.Queue) {
			t.Errorf("setting %d %s: wire %d, catalog %d", i, s.Name, w.Get(wireField(s.Name)), s.Get(c.Queue))
		}
	}
	if back := catalogConfigOf(w); back != c {
		t.Fatalf("round trip: %+v, want %+v", back, c)
	}
	infos := settingInfos()
	if len(infos) != len(wire.ConfigFieldList()) {
		t.Fatalf("%d settings reported, the wire has %d fields", len(infos), len(wire.ConfigFieldList()))
	}
	for i, f := range wire.ConfigFieldList() {
		if infos[i].Name != f.Name || infos[i].Help == "" {
			t.Errorf("reported setting %d is %+v, the wire's field %s", i, infos[i], f.Name)
		}
	}
}
