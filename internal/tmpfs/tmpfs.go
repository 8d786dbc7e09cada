// Package tmpfs mounts small RAM file systems for tests that need a disk
// that really fills up. It is for tests only: it mounts, so it needs root,
// and it skips the calling test loudly when it cannot mount.
package tmpfs

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size (e.g. "4m") on a fresh directory, unmounted
// when the test ends, and returns the directory. Without root, or when the
// mount fails, it skips the test with a reason.
func Mount(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: this disk-full test needs root to mount a small tmpfs; CI runs it as root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("SKIPPED: cannot mount a tmpfs even as root (%v); this disk-full test did not run", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
