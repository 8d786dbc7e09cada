package deadline

import (
	"errors"
	"testing"
	"time"
)

// recorder counts the deadlines set on it and can fail them.
type recorder struct {
	sets []time.Time
	fail error
}

func (r *recorder) SetWriteDeadline(t time.Time) error {
	if r.fail != nil {
		return r.fail
	}
	r.sets = append(r.sets, t)
	return nil
}

func TestWriter_ArmsOncePerQuarterTimeoutAndNeverLeavesLessThanThreeQuarters(t *testing.T) {
	const timeout = 8 * time.Second
	start := time.Unix(1_000_000, 0)
	var w Writer
	var r recorder
	// A write every 100 ms for 20 s.
	for at := start; at.Before(start.Add(20 * time.Second)); at = at.Add(100 * time.Millisecond) {
		if err := w.Arm(&r, at, timeout); err != nil {
			t.Fatal(err)
		}
		last := r.sets[len(r.sets)-1]
		if left := last.Sub(at); left < timeout-timeout/4 || left > timeout {
			t.Fatalf("at +%v the deadline is %v ahead, want %v..%v", at.Sub(start), left, timeout-timeout/4, timeout)
		}
	}
	// 20 s at one set per 2 s (a quarter of 8 s), the first included.
	if n := len(r.sets); n < 10 || n > 11 {
		t.Fatalf("%d deadlines set for 200 writes over 20 s, want 10 or 11", n)
	}
}

func TestWriter_ArmsAgainAfterAFailedSetOrAShorterTimeout(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	var w Writer
	r := recorder{fail: errors.New("closed")}
	if err := w.Arm(&r, start, time.Second); err == nil {
		t.Fatal("a failed set was not reported")
	}
	r.fail = nil
	if err := w.Arm(&r, start, time.Second); err != nil || len(r.sets) != 1 {
		t.Fatalf("after a failed set: %v, %d sets, want the deadline set", err, len(r.sets))
	}
	// A shorter timeout than the armed deadline allows is set at once.
	if err := w.Arm(&r, start, 100*time.Millisecond); err != nil || len(r.sets) != 2 || !r.sets[1].Equal(start.Add(100*time.Millisecond)) {
		t.Fatalf("a shorter timeout: %v, sets %v", err, r.sets)
	}
	w.Forget()
	if err := w.Arm(&r, start, 100*time.Millisecond); err != nil || len(r.sets) != 3 {
		t.Fatalf("after Forget: %v, %d sets, want one more", err, len(r.sets))
	}
	if err := w.Arm(&r, start, 0); !errors.Is(err, ErrTimeout) {
		t.Fatalf("timeout 0: %v, want ErrTimeout", err)
	}
}

func TestWriter_ZeroAllocs(t *testing.T) {
	var w Writer
	var r recorder
	r.sets = make([]time.Time, 0, 1024)
	now := time.Unix(1_000_000, 0)
	if n := testing.AllocsPerRun(100, func() { _ = w.Arm(&r, now, time.Second) }); n != 0 {
		t.Fatalf("%v allocations per Arm, want 0", n)
	}
}
