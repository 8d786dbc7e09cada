//go:build !chaosdisk

package diskfault

// Armable reports whether this build can inject faults.
const Armable = false

func syncError(string) error { return nil }

func writeFault(_ string, n int) (int, error) { return n, nil }

func arm(Kind, string, int) error { return ErrNotArmable }

func remaining() int { return 0 }
