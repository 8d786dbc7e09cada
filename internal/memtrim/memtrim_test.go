package memtrim

import (
	"errors"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestConfig_ValidateNamesTheBadField(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for field, c := range map[string]Config{
		"Interval":    {Interval: time.Millisecond, ExcessBytes: 32 << 20},
		"ExcessBytes": {Interval: time.Second, ExcessBytes: 10},
	} {
		err := c.Validate()
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
		if _, err := New(c, nil); err == nil {
			t.Errorf("New accepted a bad %s", field)
		}
	}
}

func TestStep_TrimsOnlyBeyondTheThreshold(t *testing.T) {
	tr, err := New(Config{Interval: time.Second, ExcessBytes: 100 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	trims := 0
	tr.trim = func() { trims++ }
	tr.read = func() Usage { return Usage{LiveBytes: 1000 << 20, ObjectBytes: 1050 << 20, FreeBytes: 49 << 20} }
	if tr.Step() || trims != 0 {
		t.Fatal("trimmed with 99 MiB of excess")
	}
	tr.read = func() Usage { return Usage{LiveBytes: 1000 << 20, ObjectBytes: 1050 << 20, FreeBytes: 50 << 20} }
	if !tr.Step() || trims != 1 {
		t.Fatal("did not trim at 100 MiB of excess")
	}
	// Objects below the last live count (freed since) are no garbage.
	tr.read = func() Usage { return Usage{LiveBytes: 1000 << 20, ObjectBytes: 500 << 20, FreeBytes: 99 << 20} }
	if tr.Step() || trims != 1 {
		t.Fatal("counted a shrinking heap as garbage")
	}
}

// With ExcessLivePercent the threshold grows with the live heap: a large
// live heap's ordinary garbage forces no collection.
func TestStep_ThresholdGrowsWithTheLiveHeap(t *testing.T) {
	tr, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	trims := 0
	tr.trim = func() { trims++ }
	tr.read = func() Usage { return Usage{LiveBytes: 250 << 20, ObjectBytes: 500 << 20, FreeBytes: 31 << 20} }
	if tr.Step() || trims != 0 {
		t.Fatal("trimmed 281 MiB of excess over a 250 MiB live heap (threshold 282 MiB)")
	}
	tr.read = func() Usage { return Usage{LiveBytes: 250 << 20, ObjectBytes: 500 << 20, FreeBytes: 33 << 20} }
	if !tr.Step() || trims != 1 {
		t.Fatal("did not trim 283 MiB of excess over a 250 MiB live heap")
	}
	tr.read = func() Usage { return Usage{LiveBytes: 10 << 20, ObjectBytes: 20 << 20, FreeBytes: 33 << 20} }
	if !tr.Step() || trims != 2 {
		t.Fatal("did not trim 43 MiB of excess over a 10 MiB live heap (threshold 42 MiB)")
	}
	if err := (Config{Interval: time.Second, ExcessBytes: 32 << 20, ExcessLivePercent: ExcessLivePercentMax + 1}).Validate(); err == nil {
		t.Fatal("accepted ExcessLivePercent above its maximum")
	}
}

var sink [][]byte

// TestStep_ReturnsABurstsMemory makes a real burst of garbage and checks
// that one step gives it back.
func TestStep_ReturnsABurstsMemory(t *testing.T) {
	runtime.GC()
	// No collection during the burst, so that all of it is excess.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for range 64 {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil
	var before, after Usage
	tr, err := New(Config{Interval: time.Second, ExcessBytes: 16 << 20}, func(b, a Usage) { before, after = b, a })
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Step() {
		t.Fatalf("no trim with %d bytes of excess", ReadUsage().Excess())
	}
	if before.Excess() < 48<<20 || after.Excess() > before.Excess()/2 {
		t.Fatalf("excess before %d after %d: the burst was not given back", before.Excess(), after.Excess())
	}
}
