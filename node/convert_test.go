package node

import (
	"fmt"
	"testing"

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
