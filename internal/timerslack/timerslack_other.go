//go:build !linux

package timerslack

import "time"

// Get returns ErrUnsupported: only Linux has per-thread timer slack.
func Get() (time.Duration, error) { return 0, ErrUnsupported }

// Ensure checks d and returns ErrUnsupported: only Linux has per-thread
// timer slack.
func Ensure(d time.Duration) error {
	if err := checkSlack(d); err != nil {
		return err
	}
	return ErrUnsupported
}
