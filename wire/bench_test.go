package wire

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkWire_SendRoundTrip encodes a send of 64 messages of 256 bytes
// into a frame and decodes it back, as a client and a server would.
func BenchmarkWire_SendRoundTrip(b *testing.B) {
	body := &SendRequest{Queue: "orders", Partition: 3, Messages: make([]Message, 64)}
	for i := range body.Messages {
		body.Messages[i] = Message{
			ID: fmt.Sprintf("01J0000000000000000000%04d", i), Group: fmt.Sprintf("acct-%d", i%8),
			Headers: map[string]string{"trace": "4bf92f3577b34da6"}, Body: bytes.Repeat([]byte{'x'}, 256),
		}
	}
	var stream bytes.Buffer
	br := bufio.NewReader(&stream)
	r := NewReader(br)
	b.ReportAllocs()
	for b.Loop() {
		req, err := NewRequest(1, OpSend, body)
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteFrame(&stream, req); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(stream.Len()))
		got, err := r.ReadRequest()
		if err != nil {
			b.Fatal(err)
		}
		var out SendRequest
		if err := got.Decode(&out); err != nil || len(out.Messages) != 64 {
			b.Fatalf("%v, %d messages", err, len(out.Messages))
		}
	}
}
