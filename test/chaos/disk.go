package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fillerName is the file a disk-full fault fills a node's data directory
// with.
const fillerName = "chaos-filler"

// fillLeaveBytes is the room a disk-full fault leaves: less than one
// segment's worth, so that the node's writes fail with ENOSPC as well as
// its sends being refused for want of the reserve.
const fillLeaveBytes = 1 << 20

// mountDataDirs puts every node's data directory on its own tmpfs of the
// given size (e.g. "160m"), so that a disk-full fault fills it rather than
// the machine's disk. It needs root; it returns why it could not.
func (c *Cluster) mountDataDirs(size string) error {
	if os.Geteuid() != 0 {
		return errors.New("not running as root")
	}
	for _, n := range c.slots() {
		if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", n.DataDir, "tmpfs", 0, "size="+size); err != nil {
			c.unmountDataDirs()
			return fmt.Errorf("mount tmpfs on %s: %w", n.DataDir, err)
		}
		c.mounted = append(c.mounted, n.DataDir)
	}
	return nil
}

// unmountDataDirs detaches the tmpfs data directories (their data is lost;
// the logs live elsewhere). Safe to call more than once.
func (c *Cluster) unmountDataDirs() {
	for _, dir := range c.mounted {
		unix.Unmount(dir, unix.MNT_DETACH)
	}
	c.mounted = nil
}

// DiskFaults reports whether the data directories are small file systems
// a disk-full fault may fill.
func (c *Cluster) DiskFaults() bool { return len(c.mounted) > 0 }

// removeContents empties dir, keeping dir itself (a mount point).
func removeContents(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// Fill writes a filler file into the node's data directory until at most
// leave bytes are free, and returns how much it wrote.
func (c *Cluster) Fill(n *Node, leave int64) (int64, error) {
	n.marker("data directory filled (%d bytes left)", leave)
	f, err := os.OpenFile(filepath.Join(n.DataDir, fillerName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var wrote int64
	for {
		var st unix.Statfs_t
		if err := unix.Statfs(n.DataDir, &st); err != nil {
			return wrote, err
		}
		free := int64(st.Bavail) * int64(st.Bsize)
		if free <= leave {
			return wrote, nil
		}
		chunk := min(int64(len(buf)), free-leave)
		k, err := f.Write(buf[:chunk])
		wrote += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			return wrote, nil
		}
		if err != nil {
			return wrote, err
		}
	}
}

// Unfill deletes the filler file.
func (c *Cluster) Unfill(n *Node) error {
	n.marker("filler deleted")
	err := os.Remove(filepath.Join(n.DataDir, fillerName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// diskFault fills a random node's data directory (a small tmpfs) until
// about a megabyte is left: the node must refuse sends clearly, keep
// running, and take work again when the filler is deleted.
func (in *Injector) diskFault(rng *rand.Rand, rec *FaultRecord) (func() error, error) {
	c := in.c
	if !c.DiskFaults() {
		rec.Skipped = "data directories are not on tmpfs (needs root)"
		return nil, nil
	}
	n := pickNode(rng, c.Up())
	if n == nil {
		return nil, fmt.Errorf("no node up")
	}
	rec.Targets = []string{n.ID}
	wrote, err := c.Fill(n, fillLeaveBytes)
	rec.Detail = fmt.Sprintf("data directory filled with %d MiB, %d KiB left", wrote>>20, fillLeaveBytes>>10)
	heal := func() error { return c.Unfill(n) }
	if err != nil {
		heal()
		return nil, err
	}
	return heal, nil
}

// fsyncFailures is how many fsyncs of a node's raft log an fsync-error
// fault makes fail.
const fsyncFailures = 3

// ArmFsyncFailures makes the next count fsyncs of the node's raft log fail
// with EIO, through the chaos build's control (POST /v1/debug/disk); 0
// disarms. It returns how many are still to fail.
func (c *Cluster) ArmFsyncFailures(ctx context.Context, n *Node, count int) (int, error) {
	return c.ArmDiskFault(ctx, n, "fsync", count)
}

// ArmDiskFault makes the next count operations of kind ("fsync", "write"
// or "short-write") on the node's raft log fail with EIO, through the
// chaos build's control (POST /v1/debug/disk?kind=KIND&count=N); the fault
// replaces any armed before, and 0 disarms. It returns how many are still
// to fail.
func (c *Cluster) ArmDiskFault(ctx context.Context, n *Node, kind string, count int) (int, error) {
	n.marker("%d raft log %s failures armed", count, kind)
	u := c.url(n, fmt.Sprintf("/v1/debug/disk?match=%s&kind=%s&count=%d", url.QueryEscape(raftLogMatch), url.QueryEscape(kind), count))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.httpc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("arm %s's %s failures: %w", n.ID, kind, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("arm %s's %s failures: %s: %s", n.ID, kind, resp.Status, strings.TrimSpace(string(body)))
	}
	return strconv.Atoi(strings.TrimSpace(string(body)))
}

// raftLogMatch selects the node's raft log files (DataDir/raftlog/...)
// and nothing else: body records are written while raft applies a
// command, where a failed write is fatal by design, so no fault targets
// them.
const raftLogMatch = "/raftlog/"

// fsyncFault makes a random node's next raft log fsyncs fail with EIO:
// the batches they carry must fail and be cut back, the node must keep
// running and take writes again, and nothing confirmed may be lost.
func (in *Injector) fsyncFault(ctx context.Context, rng *rand.Rand, rec *FaultRecord) (func() error, error) {
	return in.armedDiskFault(ctx, rng, rec, "fsync", fsyncFailures,
		fmt.Sprintf("next %d raft log fsyncs fail with EIO", fsyncFailures))
}

// writeFailures is how many raft log writes a write-error fault makes
// fail.
const writeFailures = 3

// writeFault makes a random node's next raft log writes fail with EIO,
// either before writing anything or after writing half (a short write,
// drawn from the fault's seed): the batches they carry must fail and be
// cut back, leaving no torn or duplicate record, the node must keep
// running and take writes again, and nothing confirmed may be lost.
func (in *Injector) writeFault(ctx context.Context, rng *rand.Rand, rec *FaultRecord) (func() error, error) {
	kind, how := "write", "fail with EIO"
	if rng.IntN(2) == 1 {
		kind, how = "short-write", "write half, then fail with EIO"
	}
	return in.armedDiskFault(ctx, rng, rec, kind, writeFailures,
		fmt.Sprintf("next %d raft log writes %s", writeFailures, how))
}

// armedDiskFault arms count failures of kind on a random running node and
// returns the heal that disarms them and records how many fired.
func (in *Injector) armedDiskFault(ctx context.Context, rng *rand.Rand, rec *FaultRecord, kind string, count int, detail string) (func() error, error) {
	c := in.c
	n := pickNode(rng, c.Up())
	if n == nil {
		return nil, fmt.Errorf("no node up")
	}
	rec.Targets, rec.Detail = []string{n.ID}, detail
	if _, err := c.ArmDiskFault(ctx, n, kind, count); err != nil {
		return nil, err
	}
	return func() error {
		if !n.Running() {
			return nil
		}
		hctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		left, err := c.ArmDiskFault(hctx, n, kind, 0)
		rec.Detail += fmt.Sprintf(" (%d fired)", count-left)
		return err
	}, nil
}
