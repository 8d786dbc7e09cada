package partition

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
)

func TestSpanRun(t *testing.T) {
	loc := func(a uint64, b, c uint32) fsm.Loc { return fsm.Loc{A: a, B: b, C: c} }
	cases := []struct {
		name   string
		locs   []fsm.Loc
		end    int
		lo, hi uint64
	}{
		{"adjacent in one entry", []fsm.Loc{loc(7, 0, 100), loc(7, 100, 100), loc(7, 200, 50)}, 3, 0, 250},
		{"out of order in one entry", []fsm.Loc{loc(7, 200, 50), loc(7, 0, 100), loc(7, 100, 100)}, 3, 0, 250},
		{"stops at another entry", []fsm.Loc{loc(7, 0, 100), loc(8, 0, 100)}, 1, 0, 100},
		{"a body record is read alone", []fsm.Loc{loc(0, 3, 40), loc(0, 3, 80)}, 1, 3, 43},
		{"stops before mostly unasked bytes", []fsm.Loc{loc(7, 0, 100), loc(7, 100_000, 100)}, 1, 0, 100},
		{"small gaps are read through", []fsm.Loc{loc(7, 0, 100), loc(7, 3000, 100)}, 2, 0, 3100},
		{"stops at the span bound", []fsm.Loc{loc(7, 0, 600<<10), loc(7, 600<<10, 600<<10)}, 1, 0, 600 << 10},
	}
	for _, tc := range cases {
		end, lo, hi := spanRun(tc.locs, 0)
		if end != tc.end || lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: run to %d, span [%d,%d); want %d, [%d,%d)", tc.name, end, lo, hi, tc.end, tc.lo, tc.hi)
		}
	}
}

// A receive of many messages sent together reads their bodies in spans
// of their entry: every delivery still gets its own headers and body,
// whatever the order the priorities deliver them in and however large.
func TestPartition_BatchedBodyReadsReturnEachMessage(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	p := c.reps[c.leader()]
	const n = 40
	want := map[string]fsm.NewMessage{}
	msgs := make([]fsm.NewMessage, n)
	for i := range msgs {
		size := 10 + i*37
		if i%9 == 4 {
			size = 200 << 10 // some large bodies: spans reach their bound
		}
		m := fsm.NewMessage{ID: fmt.Sprintf("m%d", i), Body: bytes.Repeat([]byte{byte('a' + i%26)}, size), Priority: uint8(i % 3)}
		if i%2 == 0 {
			m.Headers = map[string]string{"k": fmt.Sprint(i)}
		}
		msgs[i], want[m.ID] = m, m
	}
	res, err := p.Propose(ctxT(t), fsm.Command{Type: fsm.CmdSend, Send: &fsm.SendCmd{Messages: msgs}})
	if err != nil || res.Err != nil {
		t.Fatalf("send: %v %v", err, res.Err)
	}
	ds, err := p.Receive(ctxT(t), fsm.ReceiveCmd{Consumer: "c", Max: n, Visibility: time.Hour}, 0)
	if err != nil || len(ds) != n {
		t.Fatalf("receive: %v, %d deliveries", err, len(ds))
	}
	for _, d := range ds {
		m := want[d.ID]
		if !bytes.Equal(d.Body, m.Body) || fmt.Sprint(d.Headers) != fmt.Sprint(m.Headers) {
			t.Fatalf("%s: %d-byte body with headers %v, want %d bytes with %v", d.ID, len(d.Body), d.Headers, len(m.Body), m.Headers)
		}
		if cap(d.Body) != len(d.Body) {
			t.Fatalf("%s: body has room past its end (%d of %d): appending would overwrite another", d.ID, len(d.Body), cap(d.Body))
		}
		delete(want, d.ID)
	}
}
