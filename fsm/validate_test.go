package fsm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// wantValid fails t unless err is nil (ok) or wraps ErrInvalidArgument
// (not ok).
func wantValid(t *testing.T, what string, ok bool, err error) {
	t.Helper()
	switch {
	case ok && err != nil:
		t.Errorf("%s: refused: %v", what, err)
	case !ok && !errors.Is(err, ErrInvalidArgument):
		t.Errorf("%s: %v, want invalid argument", what, err)
	}
}

func TestCheckBatch_Bounds(t *testing.T) {
	for _, k := range []struct {
		n  int
		ok bool
	}{{-1, false}, {0, false}, {1, true}, {BatchMax, true}, {BatchMax + 1, false}} {
		wantValid(t, fmt.Sprintf("batch of %d", k.n), k.ok, CheckBatch(k.n))
	}
}

func TestValidateReceive_Bounds(t *testing.T) {
	cases := []struct {
		name string
		set  func(c *ReceiveCmd)
		acks int
		ok   bool
	}{
		{"max 0", func(c *ReceiveCmd) { c.Max = 0 }, 0, false},
		{"max 1", func(c *ReceiveCmd) { c.Max = 1 }, 0, true},
		{"max ReceiveMax", func(c *ReceiveCmd) { c.Max = ReceiveMax }, 0, true},
		{"max ReceiveMax+1", func(c *ReceiveCmd) { c.Max = ReceiveMax + 1 }, 0, false},
		{"visibility -1ns", func(c *ReceiveCmd) { c.Visibility = -1 }, 0, false},
		{"visibility 0", func(c *ReceiveCmd) { c.Visibility = 0 }, 0, true},
		{"visibility max", func(c *ReceiveCmd) { c.Visibility = VisibilityTimeoutMax }, 0, true},
		{"visibility max+1ns", func(c *ReceiveCmd) { c.Visibility = VisibilityTimeoutMax + 1 }, 0, false},
		{"empty consumer", func(c *ReceiveCmd) { c.Consumer = "" }, 0, true},
		{"consumer at the limit", func(c *ReceiveCmd) { c.Consumer = strings.Repeat("c", ConsumerBytesMax) }, 0, true},
		{"consumer over the limit", func(c *ReceiveCmd) { c.Consumer = strings.Repeat("c", ConsumerBytesMax+1) }, 0, false},
		{"consumer not UTF-8", func(c *ReceiveCmd) { c.Consumer = "\xff" }, 0, false},
		{"max bytes -1", func(c *ReceiveCmd) { c.MaxBytes = -1 }, 0, false},
		{"max bytes 0", func(c *ReceiveCmd) { c.MaxBytes = 0 }, 0, true},
		{"acks -1", func(*ReceiveCmd) {}, -1, false},
		{"acks BatchMax", func(*ReceiveCmd) {}, BatchMax, true},
		{"acks BatchMax+1", func(*ReceiveCmd) {}, BatchMax + 1, false},
		{"bad receive with valid acks", func(c *ReceiveCmd) { c.Max = -1 }, 3, false},
	}
	for _, k := range cases {
		c := ReceiveCmd{Consumer: "c", Max: 1}
		k.set(&c)
		wantValid(t, "receive with "+k.name, k.ok, ValidateReceive(&c, k.acks))
	}
}

func TestExtendItemValidate_Bounds(t *testing.T) {
	for _, k := range []struct {
		vis time.Duration
		ok  bool
	}{{-1, false}, {0, false}, {1, true}, {VisibilityTimeoutMax, true}, {VisibilityTimeoutMax + 1, false}} {
		it := ExtendItem{Receipt: Receipt{Seq: 1, Attempt: 1}, Visibility: k.vis}
		wantValid(t, fmt.Sprintf("extend by %v", k.vis), k.ok, it.Validate())
	}
}

func TestNackItemValidate_Bounds(t *testing.T) {
	for _, k := range []struct {
		name string
		it   NackItem
		ok   bool
	}{
		{"backoff", NackItem{}, true},
		{"explicit delay -1ns", NackItem{ExplicitDelay: true, Delay: -1}, false},
		{"explicit delay 0", NackItem{ExplicitDelay: true}, true},
		{"explicit delay DelayMax", NackItem{ExplicitDelay: true, Delay: DelayMax}, true},
		{"explicit delay DelayMax+1ns", NackItem{ExplicitDelay: true, Delay: DelayMax + 1}, false},
		{"delay without ExplicitDelay (ignored)", NackItem{Delay: DelayMax + 1}, true},
		{"release", NackItem{Release: true}, true},
		{"release with a delay", NackItem{Release: true, ExplicitDelay: true}, false},
	} {
		wantValid(t, "nack "+k.name, k.ok, k.it.Validate())
	}
}

func TestDeadFilterValidate_Bounds(t *testing.T) {
	for _, k := range []struct {
		name string
		f    DeadFilter
		ok   bool
	}{
		{"empty", DeadFilter{}, true},
		{"limit -1", DeadFilter{Limit: -1}, false},
		{"limit DeadListMax", DeadFilter{Limit: DeadListMax}, true},
		{"limit DeadListMax+1", DeadFilter{Limit: DeadListMax + 1}, false},
		{"DeadListMax seqs", DeadFilter{Seqs: make([]uint64, DeadListMax)}, true},
		{"DeadListMax+1 seqs", DeadFilter{Seqs: make([]uint64, DeadListMax+1)}, false},
		{"text at the limit", DeadFilter{Text: strings.Repeat("t", ReasonBytesMax)}, true},
		{"text over the limit", DeadFilter{Text: strings.Repeat("t", ReasonBytesMax+1)}, false},
		{"range of one instant", DeadFilter{FromAt: 5, ToAt: 5}, true},
		{"range ending before it starts", DeadFilter{FromAt: 5, ToAt: 4}, false},
		{"range open at the end", DeadFilter{FromAt: 5}, true},
	} {
		wantValid(t, "dead filter "+k.name, k.ok, k.f.Validate())
	}
}

func TestPeekFilterValidate_Bounds(t *testing.T) {
	for _, k := range []struct {
		name string
		f    PeekFilter
		ok   bool
	}{
		{"max 0", PeekFilter{Max: 0}, false},
		{"max 1", PeekFilter{Max: 1}, true},
		{"max PeekMax", PeekFilter{Max: PeekMax}, true},
		{"max PeekMax+1", PeekFilter{Max: PeekMax + 1}, false},
		{"max bytes -1", PeekFilter{Max: 1, MaxBytes: -1}, false},
		{"max bytes 0", PeekFilter{Max: 1, MaxBytes: 0}, true},
	} {
		wantValid(t, "peek "+k.name, k.ok, k.f.Validate())
	}
}

// The FSM applies the exported checks: a command each refuses is refused
// by Apply too, and changes nothing.
func TestApply_RefusesWhatTheValidatorsRefuse(t *testing.T) {
	h := newHarness(t)
	h.send("a", "", "body")
	r := h.receiveOne("c").Receipt
	before := h.f.Digest()
	refused := []Command{
		{Type: CmdExtend, Extend: &ExtendCmd{Items: []ExtendItem{{Receipt: r}}}},
		{Type: CmdNack, Nack: &NackCmd{Items: []NackItem{{Receipt: r, Release: true, ExplicitDelay: true}}}},
		{Type: CmdRedrive, Redrive: &DeadFilter{Limit: -1}},
		{Type: CmdDeleteDead, DeleteDead: &DeadFilter{FromAt: 2, ToAt: 1}},
		{Type: CmdReceive, Receive: &ReceiveCmd{Consumer: "c", Max: ReceiveMax + 1}},
		{Type: CmdReceiveAck, ReceiveAck: &ReceiveAckCmd{Receipts: make([]Receipt, BatchMax+1), Receive: ReceiveCmd{Consumer: "c", Max: 1}}},
		{Type: CmdReject, Reject: &RejectCmd{}},
	}
	for _, c := range refused {
		res := h.apply(c)
		err := res.Err
		if err == nil && len(res.Settled) == 1 {
			err = res.Settled[0]
		}
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %+v, want invalid argument", c.Type, res)
		}
	}
	if h.f.Digest() != before {
		t.Fatal("refused commands changed the state")
	}
}
