package wire

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Mirrors of the receive and ack bodies without their encoders and
// parsers: reflection encodes and decodes them, the reference the
// hand-written code must reproduce.
type reflectReceiveRequest struct {
	Queue      string        `msgpack:"queue"`
	Partition  int           `msgpack:"partition"`
	Consumer   string        `msgpack:"consumer,omitempty"`
	Max        int           `msgpack:"max"`
	Visibility time.Duration `msgpack:"visibility,omitempty"`
	Wait       time.Duration `msgpack:"wait,omitempty"`
	Acks       []Receipt     `msgpack:"acks,omitempty"`
}

type reflectDelivery struct {
	Partition  int               `msgpack:"partition"`
	Seq        uint64            `msgpack:"seq"`
	Attempt    uint32            `msgpack:"attempt"`
	ID         string            `msgpack:"id"`
	Group      string            `msgpack:"group,omitempty"`
	Headers    map[string]string `msgpack:"headers,omitempty"`
	Body       []byte            `msgpack:"body"`
	EnqueuedAt int64             `msgpack:"enqueued_at"`
	Deadline   int64             `msgpack:"deadline"`
	Priority   Priority          `msgpack:"priority,omitempty"`
}

type reflectReceiveResponse struct {
	Messages   []reflectDelivery `msgpack:"messages,omitempty"`
	AckResults []ItemResult      `msgpack:"ack_results,omitempty"`
}

type reflectAckRequest struct {
	Queue     string    `msgpack:"queue"`
	Partition int       `msgpack:"partition"`
	Receipts  []Receipt `msgpack:"receipts"`
}

type reflectAckResponse struct {
	Results []ItemResult `msgpack:"results"`
}

func drawReceipts(t *rapid.T, label string) []Receipt {
	var out []Receipt
	if !rapid.Bool().Draw(t, label+"Nil") {
		out = []Receipt{}
	}
	for range rapid.IntRange(0, 4).Draw(t, label+"N") {
		out = append(out, Receipt{Partition: rapid.IntRange(-3, 1<<40).Draw(t, "p"), Seq: rapid.Uint64().Draw(t, "seq"),
			Attempt: rapid.Uint32().Draw(t, "attempt")})
	}
	return out
}

func drawItemResults(t *rapid.T, label string) []ItemResult {
	var out []ItemResult
	if !rapid.Bool().Draw(t, label+"Nil") {
		out = []ItemResult{}
	}
	for range rapid.IntRange(0, 4).Draw(t, label+"N") {
		out = append(out, ItemResult{Code: Code(rapid.Uint16().Draw(t, "code")), Error: rapid.String().Draw(t, "error")})
	}
	return out
}

// drawDelivery draws a delivery; multi reports headers with more than one
// entry (whose order in a map encoding is not fixed).
func drawDelivery(t *rapid.T) (d Delivery, multi bool) {
	d = Delivery{Partition: rapid.IntRange(-3, 1<<40).Draw(t, "p"), Seq: rapid.Uint64().Draw(t, "seq"),
		Attempt: rapid.Uint32().Draw(t, "attempt"), ID: rapid.String().Draw(t, "id"), Group: rapid.String().Draw(t, "group"),
		Body: rapid.SliceOfN(rapid.Byte(), 0, 70000).Draw(t, "body"), EnqueuedAt: rapid.Int64().Draw(t, "enq"),
		Deadline: rapid.Int64().Draw(t, "deadline"), Priority: Priority(rapid.IntRange(0, PriorityMax).Draw(t, "priority"))}
	if rapid.Bool().Draw(t, "nilBody") {
		d.Body = nil
	}
	if rapid.Bool().Draw(t, "headers") {
		d.Headers = rapid.MapOfN(rapid.String(), rapid.String(), 0, 3).Draw(t, "h")
		multi = len(d.Headers) > 1
	}
	return d, multi
}

// encodeBoth encodes hand and refl and, unless unordered, fails when the
// bytes differ; it returns the hand encoding.
func encodeBoth(t *rapid.T, what string, hand, refl any, unordered bool) []byte {
	h, err := EncodeBody(hand)
	if err != nil {
		t.Fatal(err)
	}
	r, err := EncodeBody(refl)
	if err != nil {
		t.Fatal(err)
	}
	if !unordered && !bytes.Equal(h, r) {
		t.Fatalf("%s encodings differ:\nhand %x\nrefl %x", what, h, r)
	}
	return h
}

// parseAgrees decodes data by hand into got and by reflection into want
// and fails unless conv(want) equals got.
func parseAgrees[G, W any](t *rapid.T, what string, data []byte, conv func(W) G) {
	var want W
	if err := reflectDecode(data, &want); err != nil {
		t.Fatalf("%s: reflection cannot read it: %v", what, err)
	}
	var got G
	if err := DecodeBody(data, &got); err != nil {
		t.Fatalf("%s: parse: %v", what, err)
	}
	if w := conv(want); !reflect.DeepEqual(got, w) {
		t.Fatalf("%s: parsed %+v, reflection %+v", what, got, w)
	}
}

func fromReflectResponse(r reflectReceiveResponse) ReceiveResponse {
	out := ReceiveResponse{AckResults: r.AckResults}
	if r.Messages != nil {
		out.Messages = make([]Delivery, len(r.Messages))
		for i, d := range r.Messages {
			out.Messages[i] = Delivery(d)
		}
	}
	return out
}

func TestReceiveBodies_HandEncodingMatchesReflection(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := ReceiveRequest{Queue: rapid.String().Draw(t, "queue"), Partition: rapid.IntRange(-3, 1<<40).Draw(t, "p"),
			Consumer: rapid.String().Draw(t, "consumer"), Max: rapid.IntRange(-2, 5000).Draw(t, "max"),
			Visibility: time.Duration(rapid.Int64().Draw(t, "vis")), Wait: time.Duration(rapid.Int64().Draw(t, "wait")),
			Acks: drawReceipts(t, "acks")}
		data := encodeBoth(t, "receive request", req, reflectReceiveRequest(req), false)
		parseAgrees(t, "receive request", data, func(w reflectReceiveRequest) ReceiveRequest { return ReceiveRequest(w) })

		var resp ReceiveResponse
		var mirror reflectReceiveResponse
		unordered := false
		if !rapid.Bool().Draw(t, "nilMessages") {
			resp.Messages, mirror.Messages = []Delivery{}, []reflectDelivery{}
		}
		for range rapid.IntRange(0, 4).Draw(t, "messages") {
			d, multi := drawDelivery(t)
			unordered = unordered || multi
			resp.Messages, mirror.Messages = append(resp.Messages, d), append(mirror.Messages, reflectDelivery(d))
		}
		resp.AckResults = drawItemResults(t, "ackResults")
		mirror.AckResults = resp.AckResults
		data = encodeBoth(t, "receive response", resp, mirror, unordered)
		parseAgrees(t, "receive response", data, fromReflectResponse)

		ack := AckRequest{Queue: rapid.String().Draw(t, "aq"), Partition: rapid.IntRange(-3, 1<<40).Draw(t, "ap"),
			Receipts: drawReceipts(t, "receipts")}
		data = encodeBoth(t, "ack request", ack, reflectAckRequest(ack), false)
		parseAgrees(t, "ack request", data, func(w reflectAckRequest) AckRequest { return AckRequest(w) })

		ackResp := AckResponse{Results: drawItemResults(t, "results")}
		data = encodeBoth(t, "ack response", ackResp, reflectAckResponse(ackResp), false)
		parseAgrees(t, "ack response", data, func(w reflectAckResponse) AckResponse { return AckResponse(w) })
	})
}

// drawLoose draws a map with some of keys (each value from its generator,
// or nil), maybe an unknown key, in any order: what a peer may send.
func drawLoose(t *rapid.T, keys map[string]func() any) map[string]any {
	m := map[string]any{}
	for k, gen := range keys {
		switch rapid.IntRange(0, 2).Draw(t, k) {
		case 1:
			m[k] = gen()
		case 2:
			m[k] = nil
		}
	}
	if rapid.Bool().Draw(t, "unknown") {
		m["later"] = []any{1, "x", map[string]any{"y": nil}}
	}
	return m
}

func TestParseReceiveBodies_AgreesWithReflection(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		receipt := func() any {
			return drawLoose(t, map[string]func() any{
				"partition": func() any { return rapid.IntRange(-3, 1<<40).Draw(t, "p") },
				"seq":       func() any { return rapid.Uint64().Draw(t, "seq") },
				"attempt":   func() any { return rapid.Uint32().Draw(t, "attempt") },
			})
		}
		list := func(item func() any) func() any {
			return func() any {
				out := []any{}
				for range rapid.IntRange(0, 3).Draw(t, "len") {
					out = append(out, item())
				}
				return out
			}
		}
		result := func() any {
			return drawLoose(t, map[string]func() any{
				"code":  func() any { return rapid.Uint16().Draw(t, "code") },
				"error": func() any { return rapid.String().Draw(t, "error") },
			})
		}
		delivery := func() any {
			return drawLoose(t, map[string]func() any{
				"partition":   func() any { return rapid.IntRange(-3, 1<<40).Draw(t, "p") },
				"seq":         func() any { return rapid.Uint64().Draw(t, "seq") },
				"attempt":     func() any { return rapid.Uint32().Draw(t, "attempt") },
				"id":          func() any { return rapid.String().Draw(t, "id") },
				"group":       func() any { return rapid.String().Draw(t, "group") },
				"headers":     func() any { return rapid.MapOfN(rapid.String(), rapid.String(), 0, 2).Draw(t, "h") },
				"body":        func() any { return rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "body") },
				"enqueued_at": func() any { return rapid.Int64().Draw(t, "enq") },
				"deadline":    func() any { return rapid.Int64().Draw(t, "deadline") },
			})
		}
		encode := func(v any) []byte {
			data, err := EncodeBody(v)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
		parseAgrees(t, "receive request", encode(drawLoose(t, map[string]func() any{
			"queue":      func() any { return rapid.String().Draw(t, "q") },
			"partition":  func() any { return rapid.IntRange(-3, 1<<40).Draw(t, "p") },
			"consumer":   func() any { return rapid.String().Draw(t, "c") },
			"max":        func() any { return rapid.IntRange(-3, 5000).Draw(t, "max") },
			"visibility": func() any { return rapid.Int64().Draw(t, "vis") },
			"wait":       func() any { return rapid.Int64().Draw(t, "wait") },
			"acks":       list(receipt),
		})), func(w reflectReceiveRequest) ReceiveRequest { return ReceiveRequest(w) })
		parseAgrees(t, "receive response", encode(drawLoose(t, map[string]func() any{
			"messages":    list(delivery),
			"ack_results": list(result),
		})), fromReflectResponse)
		parseAgrees(t, "ack request", encode(drawLoose(t, map[string]func() any{
			"queue":     func() any { return rapid.String().Draw(t, "q") },
			"partition": func() any { return rapid.IntRange(-3, 1<<40).Draw(t, "p") },
			"receipts":  list(receipt),
		})), func(w reflectAckRequest) AckRequest { return AckRequest(w) })
		parseAgrees(t, "ack response", encode(drawLoose(t, map[string]func() any{
			"results": list(result),
		})), func(w reflectAckResponse) AckResponse { return AckResponse(w) })
	})
}

func TestParseReceiveBodies_RefuseWhatDoesNotFit(t *testing.T) {
	for name, c := range map[string]struct {
		body any
		into any
		want Code // receipts say which field, as Receipt's decoder does
	}{
		"attempt beyond 32 bits": {map[string]any{"acks": []any{map[string]any{"attempt": int64(1) << 32}}}, &ReceiveRequest{}, CodeInvalidArgument},
		"negative seq":           {map[string]any{"receipts": []any{map[string]any{"seq": -1}}}, &AckRequest{}, CodeInvalidArgument},
		"code beyond 16 bits":    {map[string]any{"results": []any{map[string]any{"code": 1 << 16}}}, &AckResponse{}, CodeMalformed},
		"body not bytes":         {map[string]any{"messages": []any{map[string]any{"body": 7}}}, &ReceiveResponse{}, CodeMalformed},
		"max not a number":       {map[string]any{"max": "all"}, &ReceiveRequest{}, CodeMalformed},
		"receipts not a list":    {map[string]any{"receipts": "all"}, &AckRequest{}, CodeMalformed},
		"not a map":              {[]any{1}, &ReceiveResponse{}, CodeMalformed},
	} {
		data, err := EncodeBody(c.body)
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeBody(data, c.into); CodeOf(err) != c.want {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
