package partition

import (
	"errors"
	"github.com/ferrymq/ferry/internal/testwait"
	"github.com/ferrymq/ferry/internal/tmpfs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wal"
)

// fill writes a file in dir until fewer than leave bytes are free, and
// returns its path.
func fill(t *testing.T, dir string, leave uint64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		free, err := freeBytesOf(dir)
		if err != nil {
			t.Fatal(err)
		}
		if free < leave {
			return path
		}
		n := min(uint64(len(chunk)), free-leave+1)
		if _, err := f.Write(chunk[:n]); err != nil {
			return path // full
		}
	}
}

// On a real full disk the leader refuses sends with ErrDiskFull while
// consumers still receive and ack; nothing is lost, and sends work again
// by themselves once space returns.
func TestPartition_RealFullDiskRefusesSendsAndRecovers(t *testing.T) {
	root := tmpfs.Mount(t, "24m")
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.Dir = filepath.Join(root, "replica")
		cfg.DiskReserveBytes = 2 << 20
	})
	p := c.reps[c.leader()]
	send(t, p, "kept", 5)
	filler := fill(t, root, 1<<20)
	testwait.Until(t, 10*time.Second, "sends refused on the full disk", func() bool {
		_, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: "refused", Body: make([]byte, 1000)}})
		return errors.Is(err, ErrDiskFull)
	})
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: 2}, 0)
	if err != nil || len(ds) != 2 {
		t.Fatalf("receive on the full disk: %v, %d", err, len(ds))
	}
	if errs, err := p.Ack(ctxT(t), []fsm.Receipt{ds[0].Receipt, ds[1].Receipt}); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("ack on the full disk: %v %v", err, errs)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "sends to work once space returns", func() bool {
		out, err := p.Send(ctxT(t), []fsm.NewMessage{{ID: "after", Body: []byte("x")}})
		return err == nil && out[0].Err == nil
	})
	if st := p.Stats(); st.Ready != 4 {
		t.Fatalf("after the full disk: %+v, want 3 kept and 1 new ready", st)
	}
}

// A body record that cannot be written for want of space is an error that
// changes nothing, and the next append works once space returns.
func TestPartition_BodyRecordAppendSurvivesFullDisk(t *testing.T) {
	root := tmpfs.Mount(t, "4m")
	w, _, err := wal.Open(wal.DefaultConfig(filepath.Join(root, "wal")))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := newReplicaBodies(w, nil, nil)
	if err := b.finishRestore(); err != nil {
		t.Fatal(err)
	}
	filler := fill(t, root, 0)
	mark := w.End()
	var failed error
	for i := range 64 {
		if _, failed = b.Append(uint64(i), make([]byte, 64<<10)); failed != nil {
			break
		}
		if err := w.Sync(); err != nil {
			failed = err
			break
		}
	}
	if failed == nil {
		t.Fatal("appends never failed on a full disk")
	}
	// What a relocation does when its copies cannot be made durable.
	if err := w.RollbackTo(mark); err != nil {
		t.Fatalf("cut back: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	loc, err := b.Append(99, []byte("after"))
	if err != nil {
		t.Fatalf("append once space returned: %v", err)
	}
	if _, payload, err := b.Read(loc); err != nil || string(payload) != "after" {
		t.Fatalf("read back: %q %v", payload, err)
	}
}
