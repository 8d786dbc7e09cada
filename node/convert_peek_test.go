package node

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wire"
)

// TestPeekedOf_EveryFieldReachesWire fills every field of fsm.Peeked and
// requires peekedOf to carry each to the wire field of the same name, and
// to leave no wire field but the partition unset.
func TestPeekedOf_EveryFieldReachesWire(t *testing.T) {
	var p fsm.Peeked
	fillDistinct(reflect.ValueOf(&p).Elem(), new(int))
	w := peekedOf(3, p)
	if w.Partition != 3 {
		t.Errorf("Partition = %d", w.Partition)
	}
	sameFields(t, "Peeked", reflect.ValueOf(p), reflect.ValueOf(w), map[string]bool{"Partition": true})
}

// A peek request's filter reaches the FSM whole; an unknown state is
// refused as an invalid argument; no byte budget means the largest.
func TestPeekFilterOf_CarriesTheFilter(t *testing.T) {
	r := &wire.PeekRequest{Max: 5, AfterSeq: 9, States: []string{"leased", "delayed"}, Group: "g", HeaderKey: "k",
		HeaderValue: "v", OlderThan: time.Minute, NoBodies: true}
	f, err := peekFilterOf(r)
	want := fsm.PeekFilter{Max: 5, MaxBytes: wire.PeekBytesMax, AfterSeq: 9, States: fsm.StatesLeased | fsm.StatesDelayed,
		Group: "g", HeaderKey: "k", HeaderValue: "v", MinAge: time.Minute, NoBodies: true}
	if err != nil || f != want {
		t.Fatalf("peekFilterOf = %+v, %v; want %+v", f, err, want)
	}
	if _, err := peekFilterOf(&wire.PeekRequest{Max: 1, States: []string{"dead"}}); !errors.Is(err, fsm.ErrInvalidArgument) {
		t.Fatalf("state dead: %v", err)
	}
}
