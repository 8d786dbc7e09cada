package wire

import (
	"errors"
	"testing"
	"time"
)

func TestPeekRequest_CheckBounds(t *testing.T) {
	for _, k := range []struct {
		max, maxBytes int
		ok            bool
	}{
		{0, 0, false}, {1, 0, true}, {PeekMax, 0, true}, {PeekMax + 1, 0, false},
		{1, -1, false}, {1, PeekBytesMax, true}, {1, PeekBytesMax + 1, false},
	} {
		err := (&PeekRequest{Max: k.max, MaxBytes: k.maxBytes}).CheckBounds()
		if (err == nil) != k.ok || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
			t.Errorf("peek max %d, max bytes %d: %v, want ok=%v", k.max, k.maxBytes, err, k.ok)
		}
	}
}

func TestReceiveRequest_CheckWait(t *testing.T) {
	for _, k := range []struct {
		wait time.Duration
		ok   bool
	}{{-1, false}, {0, true}, {ReceiveWaitMax, true}, {ReceiveWaitMax + 1, true}} {
		err := (&ReceiveRequest{Wait: k.wait}).CheckWait()
		if (err == nil) != k.ok || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
			t.Errorf("wait %v: %v, want ok=%v", k.wait, err, k.ok)
		}
	}
}
