package wire

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Mirrors of the send bodies without their encoders: reflection encodes
// them, the reference the hand-written encoders must reproduce.
type reflectSendRequest struct {
	Queue     string    `msgpack:"queue"`
	Partition int       `msgpack:"partition"`
	Messages  []Message `msgpack:"messages"`
}

type reflectSendResponse struct {
	Results []SendResult `msgpack:"results"`
}

func TestSendBodies_HandEncodingMatchesReflection(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := SendRequest{Queue: rapid.String().Draw(t, "queue"), Partition: rapid.IntRange(-3, 1<<40).Draw(t, "p")}
		headers := false
		if !rapid.Bool().Draw(t, "nilMessages") {
			req.Messages = []Message{}
		}
		for range rapid.IntRange(0, 4).Draw(t, "n") {
			m := Message{ID: rapid.String().Draw(t, "id"), Group: rapid.String().Draw(t, "group"),
				Body: rapid.SliceOfN(rapid.Byte(), 0, 70000).Draw(t, "body"), Delay: time.Duration(rapid.Int64().Draw(t, "delay"))}
			if rapid.Bool().Draw(t, "nilBody") {
				m.Body = nil
			}
			if rapid.Bool().Draw(t, "headers") {
				m.Headers = rapid.MapOfN(rapid.String(), rapid.String(), 0, 3).Draw(t, "h")
				headers = headers || len(m.Headers) > 1
				if len(m.Headers) == 0 {
					m.Headers = nil // omitted, as by reflection: it reads back as nil
				}
			}
			req.Messages = append(req.Messages, m)
		}
		hand, err := EncodeBody(req)
		if err != nil {
			t.Fatal(err)
		}
		refl, err := EncodeBody(reflectSendRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		if !headers && !bytes.Equal(hand, refl) {
			t.Fatalf("send request encodings differ:\nhand %x\nrefl %x", hand, refl)
		}
		var back reflectSendRequest
		if err := reflectDecode(hand, &back); err != nil {
			t.Fatalf("reflection cannot read the hand encoding: %v", err)
		}
		if !reflect.DeepEqual(SendRequest(back), req) {
			t.Fatalf("read back %+v, want %+v", back, req)
		}

		var resp SendResponse
		if !rapid.Bool().Draw(t, "nilResults") {
			resp.Results = []SendResult{}
		}
		for range rapid.IntRange(0, 4).Draw(t, "results") {
			resp.Results = append(resp.Results, SendResult{Seq: rapid.Uint64().Draw(t, "seq"), Duplicate: rapid.Bool().Draw(t, "dup"),
				Code: Code(rapid.Uint16().Draw(t, "code")), Error: rapid.String().Draw(t, "error")})
		}
		hand, err = EncodeBody(resp)
		if err != nil {
			t.Fatal(err)
		}
		refl, err = EncodeBody(reflectSendResponse(resp))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(hand, refl) {
			t.Fatalf("send response encodings differ:\nhand %x\nrefl %x", hand, refl)
		}
		var got SendResponse
		if err := DecodeBody(hand, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, resp) && !(len(got.Results) == 0 && len(resp.Results) == 0) {
			t.Fatalf("read back %+v, want %+v", got, resp)
		}
	})
}
