package fsm

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

func TestMessage_ULIDIdsArePackedAndSpelledBackExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 2000 {
		var raw [ulidBytes]byte
		binary.BigEndian.PutUint64(raw[:8], rng.Uint64())
		binary.BigEndian.PutUint64(raw[8:], rng.Uint64())
		var digits [ulidLen]byte
		unpackULID(&raw, &digits)
		id := string(digits[:])
		back, ok := packULID(id)
		if !ok || back != raw {
			t.Fatalf("%s: packed %x %v, want %x", id, back, ok, raw)
		}
		var m message
		m.setID(id)
		var buf [ulidLen]byte
		if m.idLen&idPacked == 0 || m.id() != id || m.idInto(&buf) != id || m.idBytes() != ulidLen {
			t.Fatalf("%s: held as %q (packed %v)", id, m.id(), m.idLen&idPacked != 0)
		}
	}
	const good = "01HZX3Q9V8K2M4N6P7R9S1T3AB"
	for _, id := range []string{
		"01hzx3q9v8k2m4n6p7r9s1t3ab", // lower case spells the same bits differently
		"81HZX3Q9V8K2M4N6P7R9S1T3AB", // more than 128 bits
		"01HZX3Q9V8K2M4N6P7R9S1T3AI", "01HZX3Q9V8K2M4N6P7R9S1T3AL", "01HZX3Q9V8K2M4N6P7R9S1T3AO",
		"01HZX3Q9V8K2M4N6P7R9S1T3AU", good[:25], good + "C", "", "m1",
	} {
		var m message
		m.setID(id)
		if m.idLen&idPacked != 0 || m.id() != id || m.idBytes() != len(id) {
			t.Errorf("%q: held as %q, packed %v", id, m.id(), m.idLen&idPacked != 0)
		}
	}
}

// TestFSM_ULIDIdsTakeSixteenBytes queues messages whose ids are in the
// client's ULID layout and, as many again, whose ids are the same in lower
// case (26 bytes held as a string, in the 32-byte class): the packed ids
// save 16 bytes per message.
func TestFSM_ULIDIdsTakeSixteenBytes(t *testing.T) {
	const count = 100_000
	heapFor := func(lower bool) float64 {
		cfg := DefaultQueueConfig()
		cfg.DedupWindow = 0
		f, err := New(cfg, NewMemBodyStore())
		wantNoErr(t, err)
		before := heapInUse()
		msgs := make([]NewMessage, 500)
		var digits [ulidLen]byte
		for done := 0; done < count; done += len(msgs) {
			for i := range msgs {
				var raw [ulidBytes]byte
				binary.BigEndian.PutUint64(raw[8:], uint64(done+i))
				unpackULID(&raw, &digits)
				msgs[i] = NewMessage{ID: string(digits[:])}
				if lower {
					msgs[i].ID = strings.ToLower(msgs[i].ID)
				}
			}
			f.ApplyCommand(Command{Type: CmdSend, At: t0, Send: &SendCmd{Messages: msgs}})
		}
		n := float64(heapInUse()) - float64(before)
		runtime.KeepAlive(f)
		return n
	}
	packed, plain := heapFor(false), heapFor(true)
	if saved := (plain - packed) / count; saved < 12 {
		t.Fatalf("packed ids save %.1f bytes per message (want at least 12)", saved)
	} else {
		t.Logf("packed ids save %.1f bytes per message", saved)
	}
}
