//go:build !chaosdisk

package diskfault

// Armable reports whether this build can inject faults.
const Armable = false

func syncError(string) error { return nil }

func arm(string, int) error { return ErrNotArmable }

func remaining() int { return 0 }
