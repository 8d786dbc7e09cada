package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestWire_CheckHelloAndWelcome(t *testing.T) {
	if err := CheckHello(NewHello("test")); err != nil {
		t.Fatalf("own hello refused: %v", err)
	}
	err := CheckHello(Hello{Magic: Magic, Version: ProtocolVersion + 1})
	if !errors.Is(err, ErrProtocolVersion) {
		t.Fatalf("newer version: %v", err)
	}
	if err := CheckHello(Hello{Magic: Magic}); !errors.Is(err, ErrProtocolVersion) {
		t.Fatalf("version 0: %v", err)
	}
	if err := CheckHello(Hello{Magic: "HTTP/", Version: ProtocolVersion}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad magic: %v", err)
	}
	if err := CheckWelcome(Welcome{Version: ProtocolVersion, NodeID: "n1"}); err != nil {
		t.Fatalf("own welcome refused: %v", err)
	}
	if err := CheckWelcome(Welcome{Version: 2}); !errors.Is(err, ErrProtocolVersion) {
		t.Fatalf("welcome of version 2: %v", err)
	}
}

// handshake runs ServerHandshake and ClientHandshake over an in-memory
// connection.
func handshake(t *testing.T, hello Hello) (Hello, error, Welcome, error) {
	t.Helper()
	cli, srv := net.Pipe()
	defer cli.Close()
	deadline := time.Now().Add(5 * time.Second)
	_ = cli.SetDeadline(deadline)
	_ = srv.SetDeadline(deadline)
	type result struct {
		h   Hello
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer srv.Close()
		h, err := ServerHandshake(srv, NewReader(bufio.NewReader(srv)), Welcome{NodeID: "n1", Server: "ferryd/test"})
		done <- result{h, err}
	}()
	w, cerr := ClientHandshake(cli, NewReader(bufio.NewReader(cli)), hello)
	r := <-done
	return r.h, r.err, w, cerr
}

func TestWire_HandshakeAccepted(t *testing.T) {
	h, serr, w, cerr := handshake(t, NewHello("ferry-go/test"))
	if serr != nil || cerr != nil {
		t.Fatalf("server %v, client %v", serr, cerr)
	}
	if h.Client != "ferry-go/test" || w.NodeID != "n1" || w.Version != ProtocolVersion || w.Server != "ferryd/test" {
		t.Fatalf("hello %+v, welcome %+v", h, w)
	}
}

func TestWire_HandshakeVersionMismatch(t *testing.T) {
	_, serr, _, cerr := handshake(t, Hello{Magic: Magic, Version: 9, Client: "future"})
	if !errors.Is(serr, ErrProtocolVersion) || !errors.Is(cerr, ErrProtocolVersion) {
		t.Fatalf("server %v, client %v", serr, cerr)
	}
}

func TestWire_ServerHandshakeRefusesStrangers(t *testing.T) {
	var out bytes.Buffer
	in := bytes.NewReader([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	r := NewReader(bufio.NewReader(in))
	if _, err := ServerHandshake(&out, r, Welcome{}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("HTTP request: %v", err)
	}
	if r.max != MaxFrameBytes {
		t.Fatalf("reader limit left at %d", r.max)
	}
	var resp Response
	if err := ReadFrame(bufio.NewReader(&out), 0, &resp); err != nil || resp.Code != CodeFrameTooLarge {
		t.Fatalf("refusal %+v, %v", resp, err)
	}
	// A peer that closes before saying anything gets no answer.
	out.Reset()
	if _, err := ServerHandshake(&out, NewReader(bufio.NewReader(bytes.NewReader(nil))), Welcome{}); err != io.EOF || out.Len() != 0 {
		t.Fatalf("silent peer: %v, %d bytes answered", err, out.Len())
	}
}

func TestWire_ClientHandshakeOddAnswers(t *testing.T) {
	answer := func(resp Response) error {
		var in bytes.Buffer
		if err := WriteFrame(&in, resp); err != nil {
			t.Fatal(err)
		}
		_, err := ClientHandshake(io.Discard, NewReader(bufio.NewReader(&in)), NewHello("t"))
		return err
	}
	if err := answer(Response{ID: 3}); !errors.Is(err, ErrMalformed) {
		t.Errorf("answer with a request id: %v", err)
	}
	body, _ := EncodeBody(Welcome{Version: 7})
	if err := answer(Response{Body: body}); !errors.Is(err, ErrProtocolVersion) {
		t.Errorf("welcome of another version: %v", err)
	}
	if err := answer(Response{Code: CodeUnavailable, Error: "shutting down"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("refusal: %v", err)
	}
	if _, err := ClientHandshake(failWriter{}, NewReader(bytes.NewReader(nil)), NewHello("t")); err == nil {
		t.Error("write failure ignored")
	}
	if _, err := ClientHandshake(io.Discard, NewReader(bytes.NewReader(nil)), NewHello("t")); !errors.Is(err, io.EOF) {
		t.Errorf("closed before the welcome: %v", err)
	}
}

func TestWire_HandshakeTokenCheckedAndBounded(t *testing.T) {
	cli, srv := net.Pipe()
	defer cli.Close()
	_ = cli.SetDeadline(time.Now().Add(5 * time.Second))
	_ = srv.SetDeadline(time.Now().Add(5 * time.Second))
	got := make(chan string, 1)
	go func() {
		defer srv.Close()
		ServerHandshakeCheck(srv, NewReader(bufio.NewReader(srv)), Welcome{NodeID: "n1"}, func(h Hello) error {
			got <- h.Token
			return Errorf(CodeUnauthorized, "unknown token")
		})
	}()
	hello := NewHello("t")
	hello.Token = "secret"
	if _, err := ClientHandshake(cli, NewReader(bufio.NewReader(cli)), hello); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("refused token: %v", err)
	}
	if tok := <-got; tok != "secret" {
		t.Fatalf("server saw token %q", tok)
	}
	hello.Token = string(bytes.Repeat([]byte("x"), TokenBytesMax+1))
	if err := CheckHello(hello); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("oversized token: %v", err)
	}
}
