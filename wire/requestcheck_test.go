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

func TestPeekAndDeleteMessages_CheckBoundsOnFilters(t *testing.T) {
	if err := (&PeekRequest{Max: 1, States: make([]string, PeekStatesMax+1)}).CheckBounds(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("peek of too many states: %v", err)
	}
	one := []MessageRef{{Seq: 1, ID: "a"}}
	for _, k := range []struct {
		r  DeleteMessagesRequest
		ok bool
	}{
		{DeleteMessagesRequest{}, false},
		{DeleteMessagesRequest{Items: one}, true},
		{DeleteMessagesRequest{Items: make([]MessageRef, DeleteMessagesMax)}, true},
		{DeleteMessagesRequest{Items: make([]MessageRef, DeleteMessagesMax+1)}, false},
		{DeleteMessagesRequest{Items: one, States: make([]string, PeekStatesMax+1)}, false},
	} {
		if err := k.r.CheckBounds(); (err == nil) != k.ok || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
			t.Errorf("delete of %d items in %d states: %v, want ok=%v", len(k.r.Items), len(k.r.States), err, k.ok)
		}
	}
}
