package diskfault

import (
	"errors"
	"syscall"
	"testing"
)

func TestDiskfault_ArmMatchesBuild(t *testing.T) {
	defer Arm("", 0)
	err := Arm("raftlog", 2)
	if !Armable {
		if !errors.Is(err, ErrNotArmable) || SyncError("/d/raftlog") != nil || Remaining() != 0 {
			t.Fatalf("normal build: Arm = %v, and a fault fired", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if SyncError("/d/bodies") != nil {
		t.Fatal("a directory that does not match failed")
	}
	for i := range 2 {
		if err := SyncError("/d/raftlog"); !errors.Is(err, syscall.EIO) {
			t.Fatalf("armed fsync %d: %v, want EIO", i, err)
		}
	}
	if SyncError("/d/raftlog") != nil || Remaining() != 0 {
		t.Fatal("more failures than armed")
	}
	if Arm("x", SyncCountMax+1) == nil {
		t.Fatal("count beyond SyncCountMax accepted")
	}
}
