package clock

import (
	"errors"
	"testing"
	"time"
)

func TestClock_ShiftMatchesBuild(t *testing.T) {
	defer Shift(0)
	err := Shift(time.Hour)
	if !Adjustable {
		if !errors.Is(err, ErrNotAdjustable) {
			t.Fatalf("normal build: Shift = %v, want ErrNotAdjustable", err)
		}
		if Offset() != 0 {
			t.Fatalf("normal build: Offset = %v after a refused Shift", Offset())
		}
		if d := time.Until(Now()); d > time.Second || d < -time.Second {
			t.Fatalf("normal build: Now is %v from time.Now", d)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(Now()); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("shifted an hour ahead: Now is %v from time.Now", d)
	}
	if err := Shift(ShiftMax + time.Second); err == nil {
		t.Fatal("Shift beyond ShiftMax accepted")
	}
	if Offset() != time.Hour {
		t.Fatalf("a refused Shift changed the offset to %v", Offset())
	}
}
