package fsm

import (
	"fmt"
	"unicode/utf8"
)

// PausedByBytesMax is the longest name of who paused a partition that a
// CmdPause may carry.
const PausedByBytesMax = 256

// PauseCmd pauses or resumes the deliveries of a partition (CmdPause).
// While paused the partition accepts and confirms sends, acks, extends,
// nacks and rejects as ever, but a receive leases nothing (it is answered
// empty, or long-polls, as on an empty queue); leases already out run
// their course. Pausing a paused partition keeps who paused it first and
// when; resuming an unpaused one changes nothing.
type PauseCmd struct {
	Paused bool `msgpack:"paused"`
	// By names who asked: the token's name, or "" when the cluster runs
	// without tokens. At most PausedByBytesMax bytes of UTF-8.
	By string `msgpack:"by,omitempty"`
}

// PauseState is a partition's pause: whether it is paused, by whom, and
// since when (the partition clock when the pause applied, Unix
// nanoseconds). The zero value is "delivering".
type PauseState struct {
	Paused bool   `msgpack:"paused"`
	By     string `msgpack:"by,omitempty"`
	At     int64  `msgpack:"at,omitempty"`
}

// ValidatePause checks a CmdPause payload: the FSM refuses one that fails
// and changes nothing.
func ValidatePause(c *PauseCmd) error {
	if len(c.By) > PausedByBytesMax {
		return fmt.Errorf("%w: paused-by name of %d bytes (max %d)", ErrInvalidArgument, len(c.By), PausedByBytesMax)
	}
	if !utf8.ValidString(c.By) {
		return fmt.Errorf("%w: paused-by name is not UTF-8", ErrInvalidArgument)
	}
	return nil
}

// applyPause applies a CmdPause (see PauseCmd).
func (f *FSM) applyPause(c *PauseCmd) error {
	if err := ValidatePause(c); err != nil {
		return err
	}
	switch {
	case c.Paused && !f.pause.Paused:
		f.pause = PauseState{Paused: true, By: c.By, At: f.clock}
	case !c.Paused:
		f.pause = PauseState{}
	}
	return nil
}

// Pause returns the partition's pause state.
func (f *FSM) Pause() PauseState { return f.pause }
