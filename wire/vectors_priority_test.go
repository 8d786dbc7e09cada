package wire_test

import (
	"time"

	"github.com/ferrymq/ferry/wire"
)

// priorityVectors show message priorities: a send naming them, and the
// deliveries, peeks and finds that report them. A priority of 0 is left
// out of every encoding.
func priorityVectors() []vector {
	return []vector{
		mustRequest("request-send-priority", "Two messages to partition 0 of alerts: the first urgent (priority 9), the second at the default priority 0, which is left out.",
			21, wire.OpSend, &wire.SendRequest{Queue: "alerts", Messages: []wire.Message{
				{ID: "01KDX6Y2G0A5C3S9W1V7N4Q8S1", Body: []byte(`{"disk":"full"}`), Priority: 9},
				{ID: "01KDX6Y2G0A5C3S9W1V7N4Q8S2", Body: []byte(`{"disk":"ok"}`)},
			}}),
		mustResponse("response-receive-priority", "The urgent message comes first, with its priority.", 22, wire.OpReceive,
			&wire.ReceiveResponse{Messages: []wire.Delivery{{Seq: 2, Attempt: 1, ID: "01KDX6Y2G0A5C3S9W1V7N4Q8S1",
				Body: []byte(`{"disk":"full"}`), EnqueuedAt: t0, Deadline: t0 + int64(30*time.Second), Priority: 9}}}),
		mustResponse("response-peek-priority", "Peek shows each ready message's priority, in seq order.", 23, wire.OpPeek,
			&wire.PeekResponse{Messages: []wire.PeekedMessage{
				{Seq: 1, ID: "01KDX6Y2G0A5C3S9W1V7N4Q8S0", Body: []byte(`{"disk":"low"}`), EnqueuedAt: t0},
				{Seq: 2, ID: "01KDX6Y2G0A5C3S9W1V7N4Q8S1", Body: []byte(`{"disk":"full"}`), EnqueuedAt: t0, Priority: 9}}}),
	}
}
