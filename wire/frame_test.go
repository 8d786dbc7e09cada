package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// rawFrame prefixes payload with a length header claiming n bytes.
func rawFrame(n uint32, payload []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, n)
	return append(out, payload...)
}

// framed prefixes payload with its true length.
func framed(payload []byte) []byte { return rawFrame(uint32(len(payload)), payload) }

func readReq(data []byte, maxBytes int) (Request, error) {
	var req Request
	err := ReadFrame(bufio.NewReader(bytes.NewReader(data)), maxBytes, &req)
	return req, err
}

func TestWire_FrameTooLargeRejectedUnread(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    uint32
		max  int
	}{
		{"above default", MaxFrameBytes + 1, 0},
		{"max uint32", 1<<32 - 1, 0},
		{"above lowered limit", 1025, 1024},
		{"above limit when option is too big", MaxFrameBytes + 1, MaxFrameBytes * 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := bytes.NewReader(rawFrame(tc.n, []byte("rest")))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			var req Request
			err := ReadFrame(bufio.NewReaderSize(src, 16), tc.max, &req)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("got %v, want frame too large", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
				t.Errorf("allocated %d bytes for a refused frame", grew)
			}
		})
	}
}

func TestWire_FrameAtLimitAccepted(t *testing.T) {
	req, err := NewRequest(1, OpSend, &SendRequest{Messages: []Message{{ID: "x", Body: make([]byte, 900)}}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteFrame(&buf, req); err != nil {
		t.Fatal(err)
	}
	n := buf.Len() - 4
	if _, err := readReq(buf.Bytes(), n); err != nil {
		t.Fatalf("frame of exactly the limit: %v", err)
	}
	if _, err := readReq(buf.Bytes(), n-1); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("frame one above the limit: %v", err)
	}
}

func TestWire_WriteFrameRefusesOversize(t *testing.T) {
	var buf bytes.Buffer
	msg := &Message{ID: "big", Body: make([]byte, 1000)}
	err := writeFrame(&buf, msg, 1000)
	if !errors.Is(err, ErrFrameTooLarge) || buf.Len() != 0 {
		t.Fatalf("got %v with %d bytes written", err, buf.Len())
	}
	if err := writeFrame(&buf, msg, 1016); err != nil {
		t.Fatalf("frame within the limit: %v", err)
	}
}

func TestWire_TruncatedFrames(t *testing.T) {
	valid := validFrame(t)
	if _, err := readReq(nil, 0); err != io.EOF {
		t.Fatalf("empty stream: got %v, want io.EOF", err)
	}
	for cut := 1; cut < len(valid); cut++ {
		_, err := readReq(valid[:cut], 0)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d of %d: got %v, want unexpected EOF", cut, len(valid), err)
		}
	}
	// A peer announcing a large frame and sending little: the buffer grows
	// with what arrives, not with the announcement.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readReq(rawFrame(MaxFrameBytes, []byte{0x80}), 0)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short big frame: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2*readChunk {
		t.Errorf("allocated %d bytes for 1 byte received", grew)
	}
}

func TestWire_MalformedFrames(t *testing.T) {
	deep := append(bytes.Repeat([]byte{0x91}, MaxNesting+1), 0x01)
	cases := map[string][]byte{
		"zero length":         rawFrame(0, nil),
		"never-used byte":     framed([]byte{0xc1}),
		"not a map":           framed([]byte{0x01}),
		"trailing bytes":      framed([]byte{0x80, 0x80}),
		"truncated string":    framed([]byte{0x81, 0xa5, 'i', 'd'}),
		"huge array32":        framed([]byte{0x81, 0xa4, 'b', 'o', 'd', 'y', 0xdd, 0xff, 0xff, 0xff, 0xff}),
		"huge map32":          framed([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}),
		"str32 overrun":       framed([]byte{0x81, 0xdb, 0x7f, 0xff, 0xff, 0xff, 'a'}),
		"ext32 overrun":       framed([]byte{0x81, 0xa1, 'x', 0xc9, 0xff, 0xff, 0xff, 0xf0, 0x01}),
		"too deep":            framed(deep),
		"op out of range":     framed([]byte{0x81, 0xa2, 'o', 'p', 0xcd, 0x01, 0x00}),
		"id of wrong type":    framed([]byte{0x81, 0xa2, 'i', 'd', 0xa1, 'x'}),
		"non-string key":      framed([]byte{0x81, 0x01, 0x01}),
		"map16 short entries": framed([]byte{0xde, 0x00, 0x03, 0xa1, 'a', 0x01}),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := readReq(data, 0)
			if !errors.Is(err, ErrMalformedFrame) {
				t.Fatalf("got %v, want malformed", err)
			}
		})
	}
}

func TestWire_MalformedBodies(t *testing.T) {
	var body SendRequest
	for name, raw := range map[string][]byte{
		"garbage":       {0xc1, 0x00},
		"wrong type":    {0x81, 0xa5, 'q', 'u', 'e', 'u', 'e', 0x92, 0x01, 0x02},
		"huge messages": {0x81, 0xa8, 'm', 'e', 's', 's', 'a', 'g', 'e', 's', 0xdd, 0x00, 0x10, 0x00, 0x00},
		"code overflow": {0x81, 0xa4, 'c', 'o', 'd', 'e', 0xce, 0x00, 0x01, 0x00, 0x00},
	} {
		var target any = &body
		if name == "code overflow" {
			target = &ItemResult{}
		}
		if err := DecodeBody(raw, target); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want malformed", name, err)
		}
	}
}

func TestWire_ReaderLimitAndStream(t *testing.T) {
	small, large := validFrame(t), framedRequest(t, 2, strings.Repeat("x", 2000))
	stream := bytes.NewReader(append(append(append([]byte{}, small...), small...), large...))
	r := NewReader(bufio.NewReader(stream), WithMaxFrameBytes(1000))
	for range 2 {
		if _, err := r.ReadRequest(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.ReadRequest(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("got %v, want frame too large", err)
	}
	r = NewReader(bufio.NewReader(bytes.NewReader(large)), WithMaxFrameBytes(1000))
	r.SetMaxFrameBytes(0)
	if _, err := r.ReadRequest(); err != nil {
		t.Fatalf("after raising the limit: %v", err)
	}
	if _, err := r.ReadResponse(); err != io.EOF {
		t.Fatalf("end of stream: got %v, want io.EOF", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWire_WriteFrameErrors(t *testing.T) {
	if err := WriteFrame(failWriter{}, &Request{ID: 1, Op: OpAck}); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("write error: %v", err)
	}
	if err := WriteFrame(io.Discard, make(chan int)); err == nil {
		t.Fatal("encoding a channel succeeded")
	}
	if _, err := EncodeBody(func() {}); err == nil {
		t.Fatal("encoding a func succeeded")
	}
}

func TestWire_AppendFrameMatchesWriteFrame(t *testing.T) {
	prefix := []byte("keep")
	out := append([]byte{}, prefix...)
	var want bytes.Buffer
	for i, body := range []string{"hello", strings.Repeat("y", 70000), ""} {
		req, err := NewRequest(uint64(i+1), OpSend, &SendRequest{Queue: "q", Messages: []Message{{ID: "a", Body: []byte(body)}}})
		if err != nil {
			t.Fatal(err)
		}
		if out, err = AppendFrame(out, req); err != nil {
			t.Fatalf("AppendFrame %d: %v", i, err)
		}
		if err := WriteFrame(&want, req); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.HasPrefix(out, prefix) || !bytes.Equal(out[len(prefix):], want.Bytes()) {
		t.Fatalf("appended frames differ from written ones (%d vs %d bytes)", len(out)-len(prefix), want.Len())
	}
	// The frames read back one after another, whole and in order.
	r := NewReader(bufio.NewReader(bytes.NewReader(out[len(prefix):])))
	for i := range 3 {
		req, err := r.ReadRequest()
		if err != nil || req.ID != uint64(i+1) {
			t.Fatalf("frame %d: id %d, %v", i, req.ID, err)
		}
	}
}

func TestWire_AppendFrameRefusalLeavesDst(t *testing.T) {
	msg := &Message{ID: "big", Body: make([]byte, 1000)}
	dst := make([]byte, 3, 8)
	out, err := appendFrame(dst, msg, 1000)
	if !errors.Is(err, ErrFrameTooLarge) || len(out) != 3 {
		t.Fatalf("got %v with %d bytes, want frame too large and the 3 bytes of dst", err, len(out))
	}
	if out, err = appendFrame(dst, make(chan int), 1000); err == nil || len(out) != 3 {
		t.Fatalf("encoding a channel: %v with %d bytes", err, len(out))
	}
	if out, err = appendFrame(dst, msg, 1016); err != nil || len(out) != 3+4+1016 {
		t.Fatalf("frame within the limit: %v with %d bytes", err, len(out))
	}
}

func validFrame(t testing.TB) []byte { return framedRequest(t, 1, "hello") }

func framedRequest(t testing.TB, id uint64, body string) []byte {
	t.Helper()
	req, err := NewRequest(id, OpSend, &SendRequest{Queue: "q", Messages: []Message{{ID: "a", Body: []byte(body)}}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteFrame(&buf, req); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFrameBuffered_OnlyAWholeFrame(t *testing.T) {
	var stream bytes.Buffer
	if err := WriteFrame(&stream, Request{ID: 1, Op: OpSend, Body: make([]byte, 300)}); err != nil {
		t.Fatal(err)
	}
	frame := stream.Bytes()
	for cut := 0; cut <= len(frame); cut++ {
		// A reader over the first cut bytes, with all of them buffered.
		br := bufio.NewReaderSize(bytes.NewReader(frame[:cut]), 1024)
		br.Peek(cut)
		if got, want := FrameBuffered(br), cut == len(frame); got != want {
			t.Fatalf("%d of %d bytes buffered: FrameBuffered %v, want %v", cut, len(frame), got, want)
		}
	}
}
