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
				Body: rapid.SliceOfN(rapid.Byte(), 0, 70000).Draw(t, "body"), Delay: time.Duration(rapid.Int64().Draw(t, "delay")),
				Priority: Priority(rapid.SampledFrom([]uint8{0, 0, 1, PriorityMax}).Draw(t, "priority"))}
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

func TestParseSendResponse_AgreesWithReflection(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// A map shaped like a send response, with unknown keys, nil
		// values and results in any order of fields.
		results := []any{}
		for range rapid.IntRange(0, 5).Draw(t, "n") {
			if rapid.Bool().Draw(t, "nilResult") {
				results = append(results, nil)
				continue
			}
			r := map[string]any{}
			if rapid.Bool().Draw(t, "seq") {
				r["seq"] = rapid.Uint64().Draw(t, "seqv")
			}
			if rapid.Bool().Draw(t, "dup") {
				r["dup"] = rapid.Bool().Draw(t, "dupv")
			}
			if rapid.Bool().Draw(t, "code") {
				r["code"] = rapid.Uint16().Draw(t, "codev")
			}
			if rapid.Bool().Draw(t, "error") {
				r["error"] = rapid.String().Draw(t, "errorv")
			}
			if rapid.Bool().Draw(t, "extra") {
				r["later"] = []any{1, "x", map[string]any{"y": nil}}
			}
			results = append(results, r)
		}
		body := map[string]any{"results": results}
		if rapid.Bool().Draw(t, "nilResults") {
			body["results"] = nil
		}
		if rapid.Bool().Draw(t, "unknown") {
			body["next"] = "field"
		}
		data, err := EncodeBody(body)
		if err != nil {
			t.Fatal(err)
		}
		var want reflectSendResponse
		if err := reflectDecode(data, &want); err != nil {
			t.Fatal(err)
		}
		var got SendResponse
		if err := DecodeBody(data, &got); err != nil {
			t.Fatalf("parse: %v", err)
		}
		if !reflect.DeepEqual(got, SendResponse(want)) {
			t.Fatalf("parsed %+v, reflection %+v", got, want)
		}
	})
}

func TestParseSendResponse_RefusesWhatDoesNotFit(t *testing.T) {
	for name, body := range map[string]any{
		"code beyond 16 bits": map[string]any{"results": []any{map[string]any{"code": 1 << 16}}},
		"negative seq":        map[string]any{"results": []any{map[string]any{"seq": -1}}},
		"dup not a boolean":   map[string]any{"results": []any{map[string]any{"dup": "yes"}}},
		"results not a list":  map[string]any{"results": "all"},
		"not a map":           []any{1},
	} {
		data, err := EncodeBody(body)
		if err != nil {
			t.Fatal(err)
		}
		var got SendResponse
		if err := DecodeBody(data, &got); CodeOf(err) != CodeMalformed {
			t.Errorf("%s: %v, want CodeMalformed", name, err)
		}
	}
}
