package deadline

import (
	"errors"
	"time"
)

// Errors of this package.
var (
	// ErrTimeout is returned by Arm for a timeout that is not positive.
	ErrTimeout = errors.New("deadline: timeout must be positive")
)

// Setter is what a Writer arms: a net.Conn or a tls.Conn.
type Setter interface {
	SetWriteDeadline(t time.Time) error
}

// slackDiv sets how stale an armed deadline may get: Arm leaves a deadline
// in place while at least timeout - timeout/slackDiv of it remains.
const slackDiv = 4

// Writer remembers the write deadline last set on one connection and
// arms a new one only when the old one comes too close. Every write it is
// armed for gets at least three quarters of the timeout and at most the
// whole of it; under steady writes the deadline is set once per quarter
// timeout instead of once per frame. The zero value is ready; its caller
// serializes its use (the connection's write lock).
type Writer struct {
	armed time.Time // the deadline last set; zero when none or unknown
}

// Arm makes sure conn's write deadline lies between now + 3/4 timeout and
// now + timeout before a write that starts at now. A failed set forgets
// the armed deadline, so the next Arm sets it again.
func (w *Writer) Arm(conn Setter, now time.Time, timeout time.Duration) error {
	if timeout <= 0 {
		return ErrTimeout
	}
	if !w.armed.IsZero() && w.armed.Sub(now) >= timeout-timeout/slackDiv && !w.armed.After(now.Add(timeout)) {
		return nil
	}
	at := now.Add(timeout)
	if err := conn.SetWriteDeadline(at); err != nil {
		w.armed = time.Time{}
		return err
	}
	w.armed = at
	return nil
}

// Forget drops the remembered deadline: for a caller that set the
// connection's write deadline itself, the next Arm sets it again.
func (w *Writer) Forget() { w.armed = time.Time{} }
