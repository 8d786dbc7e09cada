package wire_test

import (
	"errors"
	"testing"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wire"
)

// The protocol's priority range is the state machine's.
func TestPriority_RangeMatchesFSM(t *testing.T) {
	if wire.PriorityMax != fsm.PriorityMax {
		t.Fatalf("wire.PriorityMax %d, fsm.PriorityMax %d", wire.PriorityMax, fsm.PriorityMax)
	}
}

func TestPriority_SendRoundTrip(t *testing.T) {
	req := wire.SendRequest{Queue: "q", Messages: []wire.Message{
		{ID: "a", Body: []byte("x"), Priority: 9}, {ID: "b", Body: []byte("y")}, {ID: "c", Priority: 1}}}
	body, err := wire.EncodeBody(req)
	if err != nil {
		t.Fatal(err)
	}
	var got wire.SendRequest
	if err := (wire.Request{Op: wire.OpSend, Body: body}).Decode(&got); err != nil {
		t.Fatal(err)
	}
	for i, m := range got.Messages {
		if m.Priority != req.Messages[i].Priority {
			t.Errorf("message %d: priority %d, sent %d", i, m.Priority, req.Messages[i].Priority)
		}
	}
	var refl wire.SendRequest // the reflection decoder reads it too
	if err := wire.DecodeBody(body, &struct {
		Messages *[]wire.Message `msgpack:"messages"`
	}{&refl.Messages}); err != nil || refl.Messages[0].Priority != 9 {
		t.Fatalf("reflection decoded %+v, %v", refl.Messages, err)
	}
}

// A send, delivery or peek naming a priority out of range is refused with
// CodeInvalidArgument, not truncated.
func TestPriority_OutOfRangeRefused(t *testing.T) {
	for _, p := range []int{10, 255, 256, -1} {
		body, err := wire.EncodeBody(map[string]any{"queue": "q", "partition": 0,
			"messages": []map[string]any{{"id": "a", "body": []byte("x"), "priority": p}}})
		if err != nil {
			t.Fatal(err)
		}
		var req wire.SendRequest
		err = (wire.Request{Op: wire.OpSend, Body: body}).Decode(&req)
		if !errors.Is(err, wire.ErrInvalidArgument) {
			t.Errorf("send with priority %d: %v", p, err)
		}
		body, _ = wire.EncodeBody(map[string]any{"messages": []map[string]any{{"id": "a", "priority": p}}})
		var resp wire.ReceiveResponse
		if err := wire.DecodeBody(body, &resp); !errors.Is(err, wire.ErrInvalidArgument) {
			t.Errorf("delivery with priority %d: %v", p, err)
		}
	}
}
