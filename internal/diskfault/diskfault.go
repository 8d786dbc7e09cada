// Package diskfault injects fsync errors into the write-ahead logs, for
// the chaos suite. In a normal build it does nothing and cannot be armed;
// in a build with the chaosdisk tag, Arm makes the next fsyncs of logs
// whose directory contains a given string fail with EIO, as a failing
// disk's would.
package diskfault

import "errors"

// ErrNotArmable is returned by Arm in a build without the chaosdisk tag.
var ErrNotArmable = errors.New("diskfault: fault injection not built in")

// SyncCountMax bounds how many failing fsyncs one Arm may ask for.
const SyncCountMax = 1000

// SyncError returns the injected error for an fsync of a file in dir, or
// nil. The wal calls it before every segment fsync.
func SyncError(dir string) error { return syncError(dir) }

// Arm makes the next count fsyncs of files in directories whose path
// contains match fail (count 0 disarms). A normal build returns
// ErrNotArmable.
func Arm(match string, count int) error { return arm(match, count) }

// Remaining returns how many armed fsync failures have not fired yet.
func Remaining() int { return remaining() }
