package wire

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

// reflectDecode decodes v with the msgpack library's reflection, the
// reference the hand-written parser must agree with.
func reflectDecode(data []byte, v any) error {
	return msgpack.NewDecoder(bytes.NewReader(data)).Decode(v)
}

func TestParseSendRequest_AgreesWithReflection(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := SendRequest{
			Queue:     rapid.String().Draw(t, "queue"),
			Partition: rapid.IntRange(-5, 1<<20).Draw(t, "partition"),
		}
		for i := range rapid.IntRange(0, 5).Draw(t, "n") {
			m := Message{
				ID:    rapid.String().Draw(t, "id"),
				Group: rapid.String().Draw(t, "group"),
				Body:  rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "body"),
				Delay: time.Duration(rapid.Int64().Draw(t, "delay")),
			}
			if rapid.Bool().Draw(t, "headers") {
				m.Headers = rapid.MapOfN(rapid.String(), rapid.String(), 0, 4).Draw(t, "h")
			}
			if i == 0 && rapid.Bool().Draw(t, "nilBody") {
				m.Body = nil
			}
			req.Messages = append(req.Messages, m)
		}
		data, err := msgpack.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var fast, slow SendRequest
		if err := decode(data, &fast); err != nil {
			t.Fatalf("parse: %v", err)
		}
		if err := reflectDecode(data, &slow); err != nil {
			t.Fatalf("reflect: %v", err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("parsed %+v\nreflection %+v", fast, slow)
		}
	})
}

func TestParseSendRequest_SkipsUnknownKeysAndReadsNils(t *testing.T) {
	data, err := msgpack.Marshal(map[string]any{
		"queue": "q", "extra": []any{1, "x", map[string]any{"a": nil}}, "partition": int8(-1),
		"messages": []any{nil, map[string]any{"id": "a", "body": "text", "headers": nil, "later": true, "delay": uint64(5)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var fast, slow SendRequest
	if err := decode(data, &fast); err != nil {
		t.Fatalf("parse: %v", err)
	}
	if err := reflectDecode(data, &slow); err != nil {
		t.Fatalf("reflect: %v", err)
	}
	if !reflect.DeepEqual(fast, slow) || fast.Partition != -1 || string(fast.Messages[1].Body) != "text" || fast.Messages[1].Delay != 5 {
		t.Fatalf("parsed %+v, reflection %+v", fast, slow)
	}
}

func TestParseSendRequest_RefusesBadShapes(t *testing.T) {
	for name, v := range map[string]any{
		"not a map":          []any{"q"},
		"messages not array": map[string]any{"messages": "x"},
		"message not map":    map[string]any{"messages": []any{1}},
		"body a number":      map[string]any{"messages": []any{map[string]any{"body": 7}}},
		"headers not map":    map[string]any{"messages": []any{map[string]any{"headers": []any{}}}},
		"int too big":        map[string]any{"partition": uint64(1 << 63)},
		"queue a number":     map[string]any{"queue": 3},
	} {
		data, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var r SendRequest
		if err := decode(data, &r); CodeOf(err) != CodeMalformed {
			t.Errorf("%s: err %v, want a malformed error", name, err)
		}
	}
}

func TestRequestDecode_SendBodiesShareTheRequestBody(t *testing.T) {
	in := SendRequest{Queue: "q", Messages: []Message{{ID: "a", Body: []byte("first")}, {ID: "b", Body: []byte("second")}}}
	req, err := NewRequest(1, OpSend, &in)
	if err != nil {
		t.Fatal(err)
	}
	var shared, copied SendRequest
	if err := req.Decode(&shared); err != nil {
		t.Fatal(err)
	}
	if err := DecodeBody(req.Body, &copied); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(shared, in) || !reflect.DeepEqual(copied, in) {
		t.Fatalf("decoded %+v and %+v, want %+v", shared, copied, in)
	}
	// An append to a shared body must not write over the next message.
	if cap(shared.Messages[0].Body) != len(shared.Messages[0].Body) {
		t.Fatalf("a shared body has capacity %d beyond its length %d", cap(shared.Messages[0].Body), len(shared.Messages[0].Body))
	}
	at := bytes.Index(req.Body, []byte("first"))
	req.Body[at] = 'F'
	if string(shared.Messages[0].Body) != "First" {
		t.Fatalf("Request.Decode copied the body (%q): want it to share the request's storage", shared.Messages[0].Body)
	}
	if string(copied.Messages[0].Body) != "first" {
		t.Fatalf("DecodeBody shared the caller's buffer (%q): want a copy", copied.Messages[0].Body)
	}
	// A malformed body is refused the same way through both paths.
	bad := Request{ID: 2, Op: OpSend, Body: req.Body[:len(req.Body)-1]}
	if err := bad.Decode(&shared); CodeOf(err) != CodeMalformed {
		t.Fatalf("a truncated send body: %v, want CodeMalformed", err)
	}
}
