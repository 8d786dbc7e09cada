package wire

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"
)

// FuzzWire_ReadFrame feeds arbitrary bytes to the frame reader and decodes
// what it accepts as envelopes and bodies. Nothing may panic, and whatever
// decodes must survive re-encoding unchanged.
func FuzzWire_ReadFrame(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bufio.NewReader(bytes.NewReader(data)), WithMaxFrameBytes(1<<20))
		for range 8 {
			payload, err := r.ReadRaw()
			if err != nil {
				return
			}
			payload = bytes.Clone(payload)
			var req Request
			if decode(payload, &req) == nil {
				checkRequest(t, req)
			}
			var resp Response
			if decode(payload, &resp) == nil {
				checkResponse(t, resp, Op(len(payload)%int(opEnd-1)+1))
			}
			// The payload read directly as a body of some op.
			op := Op(payload[0]%uint8(opEnd-1) + 1)
			if body := NewRequestBody(op); DecodeBody(payload, body) == nil {
				checkBody(t, body)
			}
			if body := NewResponseBody(op); DecodeBody(payload, body) == nil {
				checkBody(t, body)
			}
		}
	})
}

// checkRequest re-encodes a decoded request and its body.
func checkRequest(t *testing.T, req Request) {
	var back Request
	frameTrip(t, req, &back)
	if back.ID != req.ID || back.Op != req.Op || !bytes.Equal(back.Body, req.Body) {
		t.Fatalf("request changed in a round trip: %+v -> %+v", req, back)
	}
	if body := NewRequestBody(req.Op); body != nil && req.Decode(body) == nil {
		checkBody(t, body)
	}
}

// checkResponse re-encodes a decoded response and its body read as op's.
func checkResponse(t *testing.T, resp Response, op Op) {
	var back Response
	frameTrip(t, resp, &back)
	if back.ID != resp.ID || back.Code != resp.Code || back.Error != resp.Error ||
		back.Leader != resp.Leader || !bytes.Equal(back.Body, resp.Body) {
		t.Fatalf("response changed in a round trip: %+v -> %+v", resp, back)
	}
	if body := NewResponseBody(op); DecodeBody(resp.Body, body) == nil {
		checkBody(t, body)
	}
}

// checkBody verifies that encoding is a fixed point after one round (the
// first may turn empty collections into absent ones).
func checkBody(t *testing.T, v any) {
	once := reencode(t, v)
	twice := reencode(t, once)
	if !reflect.DeepEqual(once, twice) {
		t.Fatalf("%T not stable:\n%+v\n%+v", v, once, twice)
	}
}

func reencode(t *testing.T, v any) any {
	raw, err := EncodeBody(v)
	if err != nil {
		t.Fatalf("re-encode %T: %v", v, err)
	}
	out := reflect.New(reflect.TypeOf(v).Elem()).Interface()
	if err := DecodeBody(raw, out); err != nil {
		t.Fatalf("decode re-encoded %T: %v", v, err)
	}
	return out
}

// addSeeds adds valid frames of every sample, each bare body in a frame, and
// broken frames.
func addSeeds(f *testing.F) {
	for _, smp := range samples() {
		req, err := NewRequest(uint64(smp.op), smp.op, smp.req)
		if err != nil {
			f.Fatal(err)
		}
		resp, err := NewResponse(uint64(smp.op), smp.resp)
		if err != nil {
			f.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteFrame(&buf, req); err != nil {
			f.Fatal(err)
		}
		if err := WriteFrame(&buf, resp); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	valid := validFrame(f)
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(rawFrame(0, nil))
	f.Add(rawFrame(MaxFrameBytes+1, []byte{0x80}))
	f.Add(framed([]byte{0x81, 0xa4, 'b', 'o', 'd', 'y', 0xdd, 0xff, 0xff, 0xff, 0xff}))
	f.Add(framed(append(bytes.Repeat([]byte{0x91}, 40), 0x01)))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	for _, smp := range samples() {
		// Bare bodies in frames, for the direct body decoding below.
		for _, v := range []any{smp.req, smp.resp} {
			var buf bytes.Buffer
			if err := WriteFrame(&buf, v); err != nil {
				f.Fatal(err)
			}
			f.Add(buf.Bytes())
		}
	}
}
