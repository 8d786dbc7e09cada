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
	if n, err := WriteFault("/d/raftlog/1.seg", 10); n != 10 || err != nil {
		t.Fatalf("an fsync fault fired on a write: %d %v", n, err)
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

func TestDiskfault_WriteFaults(t *testing.T) {
	defer Arm("", 0)
	for _, tc := range []struct {
		kind    Kind
		allowed int
	}{{Write, 0}, {ShortWrite, 50}} {
		err := ArmKind(tc.kind, "raftlog", 2)
		if !Armable {
			if !errors.Is(err, ErrNotArmable) {
				t.Fatalf("normal build: ArmKind(%s) = %v", tc.kind, err)
			}
			if n, err := WriteFault("/d/raftlog/1.seg", 100); n != 100 || err != nil {
				t.Fatalf("normal build: a write fault fired: %d %v", n, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if SyncError("/d/raftlog") != nil {
			t.Fatalf("a %s fault fired on an fsync", tc.kind)
		}
		if n, err := WriteFault("/d/wal/1.seg", 100); n != 100 || err != nil {
			t.Fatalf("a path that does not match failed: %d %v", n, err)
		}
		for i := range 2 {
			n, err := WriteFault("/d/raftlog/1.seg", 100)
			if n != tc.allowed || !errors.Is(err, syscall.EIO) {
				t.Fatalf("%s %d: %d bytes allowed, %v; want %d, EIO", tc.kind, i, n, err, tc.allowed)
			}
		}
		if n, err := WriteFault("/d/raftlog/1.seg", 100); n != 100 || err != nil || Remaining() != 0 {
			t.Fatalf("more %s failures than armed", tc.kind)
		}
	}
}

func TestDiskfault_KindsAndBounds(t *testing.T) {
	defer Arm("", 0)
	for _, k := range []Kind{Sync, Write, ShortWrite} {
		got, err := ParseKind(k.String())
		if err != nil || got != k {
			t.Fatalf("ParseKind(%q) = %v, %v", k.String(), got, err)
		}
	}
	if _, err := ParseKind("torn"); !errors.Is(err, ErrBadFault) {
		t.Fatalf("ParseKind of an unknown name: %v", err)
	}
	if err := ArmKind(Kind(9), "x", 1); !errors.Is(err, ErrBadFault) {
		t.Fatalf("unknown kind armed: %v", err)
	}
	if err := ArmKind(Write, "x", CountMax+1); !errors.Is(err, ErrBadFault) {
		t.Fatalf("count beyond CountMax: %v", err)
	}
	if err := ArmKind(Write, "x", -1); !errors.Is(err, ErrBadFault) {
		t.Fatalf("negative count: %v", err)
	}
}
