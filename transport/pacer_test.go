package transport

import (
	"bytes"
	"testing"
	"time"
)

// Writes through a pacer take as long as the rate says, shared between
// writers, and count every byte.
func TestPacer_HoldsTheRate(t *testing.T) {
	p := &pacer{bytesPerSecond: 1 << 20} // 1 MiB/s
	done := make(chan struct{})
	start := time.Now()
	var bufs [2]bytes.Buffer
	errs := make(chan error, 2)
	for i := range bufs {
		go func() {
			_, err := (&pacedWriter{w: &bufs[i], p: p, done: done}).Write(make([]byte, 256<<10))
			errs <- err
		}()
	}
	for range bufs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// 512 KiB at 1 MiB/s: 0.5 s, less the 100 ms burst allowance and the
	// last 64 KiB chunk, which starts when its slot does (0.34 s).
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("512 KiB at 1 MiB/s took %v", took)
	}
	if p.bytesSent() != 512<<10 || bufs[0].Len()+bufs[1].Len() != 512<<10 {
		t.Fatalf("counted %d bytes, wrote %d", p.bytesSent(), bufs[0].Len()+bufs[1].Len())
	}
}

// An unlimited pacer never waits; a closed transport stops a waiting
// write at once.
func TestPacer_UnlimitedAndClosed(t *testing.T) {
	free := &pacer{}
	if wait := free.reserve(1 << 30); wait != 0 {
		t.Fatalf("unlimited pacer asked to wait %v", wait)
	}
	slow := &pacer{bytesPerSecond: 1}
	done := make(chan struct{})
	close(done)
	start := time.Now()
	if _, err := (&pacedWriter{w: &bytes.Buffer{}, p: slow, done: done}).Write(make([]byte, 1<<20)); err == nil {
		t.Fatal("a write past the rate of a closed transport succeeded")
	}
	if time.Since(start) > time.Second {
		t.Fatal("a closed transport did not stop the wait")
	}
}
