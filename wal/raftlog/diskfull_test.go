package raftlog

import (
	"errors"
	"github.com/ferrymq/ferry/internal/tmpfs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"
)

// fillDisk writes a file in dir until the file system is full but for
// leaveBytes, and returns its path.
func fillDisk(t *testing.T, s *Store, dir string, leaveBytes uint64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		free, err := s.FreeBytes()
		if err != nil {
			t.Fatal(err)
		}
		if free <= leaveBytes {
			return path
		}
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return path
			}
			t.Fatal(err)
		}
	}
}

// TestRaftlog_DiskFullOnSmallTmpfs fills a 4 MiB tmpfs, checks that a
// write fails with ErrDiskFull and leaves the store usable, frees space,
// checks that the same write then succeeds, and that a reopen is clean.
func TestRaftlog_DiskFullOnSmallTmpfs(t *testing.T) {
	mnt := tmpfs.Mount(t, "4m")
	cfg := testConfig(filepath.Join(mnt, "store"))
	cfg.SegmentBytesMax = 256 << 10
	cfg.EntryBytesMax = 64 << 10
	cfg.BatchBytesMax = 256 << 10
	cfg.CompactBytesMax = 64 << 10
	s, _ := openStore(t, cfg)
	g := mustGroup(t, s, "q/full/0")
	model := entries(1, 10, 1, 4096)
	mustStore(t, g, model)

	filler := fillDisk(t, s, mnt, 20<<10)
	var failed []*raft.Log
	next := uint64(11)
	for i := 0; i < 64 && failed == nil; i++ {
		batch := entries(next, next+1, 1, 8000)
		if err := g.StoreLogs(batch); err != nil {
			if !errors.Is(err, ErrDiskFull) {
				t.Fatalf("write on a full disk: %v, want ErrDiskFull", err)
			}
			failed = batch
			break
		}
		model = append(model, batch...)
		next += 2
	}
	if failed == nil {
		t.Fatal("the disk never filled up")
	}
	checkGroup(t, g, model)
	if err := g.StoreLogs(failed); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("second write on a full disk: %v, want ErrDiskFull", err)
	}
	if st := s.Stats(); st.WriteErrors < 2 {
		t.Fatalf("write errors counted: %d", st.WriteErrors)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	mustStore(t, g, failed)
	model = append(model, failed...)
	more := entries(next+2, next+5, 2, 3000)
	mustStore(t, g, more)
	model = append(model, more...)
	checkGroup(t, g, model)
	mustClose(t, s)

	s2, sum := openStore(t, cfg)
	if sum.TornTail {
		t.Fatalf("reopen after disk full found a torn tail: %s", sum)
	}
	checkGroup(t, mustGroup(t, s2, "q/full/0"), model)
}
