package transport

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fakePart is one part's scripted answer.
type fakePart struct {
	err     error // the part's future fails with it
	success bool
	sendErr error // the part cannot be sent
}

// fakeFuture is an answered part.
type fakeFuture struct {
	req  *raft.AppendEntriesRequest
	resp *raft.AppendEntriesResponse
	err  error
}

func (f *fakeFuture) Error() error                          { return f.err }
func (f *fakeFuture) Start() time.Time                      { return time.Time{} }
func (f *fakeFuture) Request() *raft.AppendEntriesRequest   { return f.req }
func (f *fakeFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// fakePipeline answers the parts sent to it as scripted, in order, once
// the test releases them. With converting set it hands its answers
// through the bounded pipeline's convert function, as the shared
// transport's pipeline does; otherwise the bounded pipeline's gather
// goroutine reads them.
type fakePipeline struct {
	script  []fakePart
	sent    atomic.Int32
	answers chan raft.AppendFuture
	held    []raft.AppendFuture
	convert func(raft.AppendFuture) (raft.AppendFuture, bool)
}

// convertingFake is a fakePipeline that offers setConvert.
type convertingFake struct{ *fakePipeline }

func (p convertingFake) setConvert(c func(raft.AppendFuture) (raft.AppendFuture, bool)) {
	p.convert = c
}

func (p *fakePipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	i := int(p.sent.Add(1)) - 1
	s := p.script[i]
	if s.sendErr != nil {
		return nil, s.sendErr
	}
	*resp = raft.AppendEntriesResponse{Term: args.Term, Success: s.success && s.err == nil}
	if s.err != nil {
		*resp = raft.AppendEntriesResponse{} // a failed decode leaves nothing
	}
	f := &fakeFuture{req: args, resp: resp, err: s.err}
	p.held = append(p.held, f)
	return f, nil
}

func (p *fakePipeline) release() {
	for _, f := range p.held {
		if p.convert == nil {
			p.answers <- f
		} else if out, ok := p.convert(f); ok {
			p.answers <- out
		}
	}
	p.held = nil
}

func (p *fakePipeline) Consumer() <-chan raft.AppendFuture { return p.answers }
func (p *fakePipeline) Close() error                       { return nil }

// splitRequest is a request that splitAppend cuts into three parts at
// maxBytes 1000.
func splitRequest() *raft.AppendEntriesRequest {
	args := &raft.AppendEntriesRequest{Term: 7, PrevLogEntry: 9, PrevLogTerm: 7}
	for i := range 3 {
		args.Entries = append(args.Entries, &raft.Log{Index: uint64(10 + i), Term: 7, Data: make([]byte, 800)})
	}
	return args
}

// pipelineModes are the two ways a bounded pipeline gets its inner
// pipeline's answers: read by its gather goroutine, or converted by the
// inner pipeline as it hands them over.
var pipelineModes = []string{"gather", "convert"}

// newTestPipeline builds a bounded pipeline over a scripted inner one,
// the way BoundedTransport.AppendEntriesPipeline does.
func newTestPipeline(script []fakePart, mode string) (raft.AppendPipeline, *fakePipeline) {
	inner := &fakePipeline{script: script, answers: make(chan raft.AppendFuture, 8)}
	var pl raft.AppendPipeline = inner
	if mode == "convert" {
		pl = convertingFake{inner}
	}
	t := &BoundedTransport{Transport: fakeTransport{pl: pl}, RPCBytesMax: 1000}
	p, err := t.AppendEntriesPipeline("b", "b")
	if err != nil {
		panic(err)
	}
	if got := p.(*boundedPipeline).gathered == nil; got != (mode == "convert") {
		panic("the bounded pipeline did not take the mode of its inner pipeline")
	}
	return p, inner
}

// fakeTransport returns its pipeline; nothing else of it is used (the
// embedded nil interface panics if it were).
type fakeTransport struct {
	pl raft.AppendPipeline
	fullTransport
}

type fullTransport interface {
	raft.Transport
	raft.WithClose
	raft.WithPreVote
}

func (f fakeTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return f.pl, nil
}

func waitAnswer(t *testing.T, p raft.AppendPipeline) raft.AppendFuture {
	t.Helper()
	select {
	case f := <-p.Consumer():
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no answer for the request")
		return nil
	}
}

// TestTransport_SplitRequestSucceedsOnlyWhenEveryPartDid: raft's pipeline
// reads only the response of a request's future and, on success, takes
// the follower to hold all of the request's entries. A request sent in
// parts must therefore answer success only when every part was stored:
// a part that errors, is refused, or cannot be sent makes the whole
// request fail, whatever the parts before it answered.
func TestTransport_SplitRequestSucceedsOnlyWhenEveryPartDid(t *testing.T) {
	ok := fakePart{success: true}
	cases := map[string]struct {
		script []fakePart
		want   bool
	}{
		"every part stored":   {[]fakePart{ok, ok, ok}, true},
		"middle part errors":  {[]fakePart{ok, {err: errors.New("i/o timeout")}, ok}, false},
		"last part errors":    {[]fakePart{ok, ok, {err: errors.New("connection reset")}}, false},
		"middle part refused": {[]fakePart{ok, {success: false}, ok}, false},
		"first part errors":   {[]fakePart{{err: errors.New("EOF")}, ok, ok}, false},
	}
	for name, c := range cases {
		for _, mode := range pipelineModes {
			splitCase(t, name+", "+mode, c.script, mode, c.want)
		}
	}
}

// splitCase sends one request cut in three parts down a pipeline whose
// inner parts answer as scripted, and checks the request's success.
func splitCase(t *testing.T, name string, script []fakePart, mode string, want bool) {
	t.Helper()
	p, inner := newTestPipeline(script, mode)
	defer p.Close()
	args := splitRequest()
	if n := len(splitAppend(args, 1000)); n != 3 {
		t.Fatalf("request cut into %d parts, want 3", n)
	}
	if _, err := p.AppendEntries(args, new(raft.AppendEntriesResponse)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	inner.release()
	f := waitAnswer(t, p)
	if f.Request() != args {
		t.Fatalf("%s: the future should carry the whole request", name)
	}
	if got := f.Response().Success; got != want {
		t.Errorf("%s: success %v, want %v", name, got, want)
	}
}

// TestTransport_SplitRequestWithAPartNotSentNeverSucceeds: when a later
// part cannot be sent, the answers to the parts that were sent must not
// make the request look stored.
func TestTransport_SplitRequestWithAPartNotSentNeverSucceeds(t *testing.T) {
	for _, mode := range pipelineModes {
		p, inner := newTestPipeline([]fakePart{{success: true}, {sendErr: errors.New("broken pipe")}, {success: true}}, mode)
		if _, err := p.AppendEntries(splitRequest(), new(raft.AppendEntriesResponse)); err == nil {
			t.Fatalf("%s: a part that could not be sent should fail the send", mode)
		}
		inner.release() // the first part's success arrives after the failure
		if f := waitAnswer(t, p); f.Response().Success {
			t.Fatalf("%s: a request missing a part answered success", mode)
		}
		p.Close()
	}
}
