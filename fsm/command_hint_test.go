package fsm

import (
	"strings"
	"testing"
)

func TestEncodeCommand_SendHintCoversTheEncodedSize(t *testing.T) {
	for _, msgs := range [][]NewMessage{
		{{ID: "a"}},
		{{ID: strings.Repeat("i", 40), Group: "g", Body: make([]byte, 256), Delay: 1 << 40}},
		{{ID: "h", Headers: map[string]string{"k": "v", "trace": strings.Repeat("x", 300)}, Body: make([]byte, 70000)}},
	} {
		for _, count := range []int{1, 64} {
			var batch []NewMessage
			for range count {
				batch = append(batch, msgs...)
			}
			c := Command{Type: CmdSend, At: 1 << 50, Send: &SendCmd{Messages: batch}}
			data, err := EncodeCommand(c)
			if err != nil {
				t.Fatal(err)
			}
			if hint := c.encodedBytesHint(); hint < len(data) || hint > 3*len(data)+64 {
				t.Fatalf("%d messages: hint %d for %d encoded bytes", len(batch), hint, len(data))
			}
		}
	}
	if hint := (Command{Type: CmdAck, Ack: &AckCmd{}}).encodedBytesHint(); hint != 0 {
		t.Fatalf("an ack's hint is %d, want 0", hint)
	}
}
