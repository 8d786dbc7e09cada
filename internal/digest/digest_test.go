package digest

import "testing"

func TestDigest_FramingSeparatesValues(t *testing.T) {
	a, b := New(), New()
	a.Str("ab")
	a.Str("c")
	b.Str("a")
	b.Str("bc")
	if a.Sum() == b.Sum() {
		t.Fatal("length prefixes do not separate strings")
	}
	c, d := New(), New()
	c.Ints(1, 2)
	d.Ints(1, 2)
	if c.Sum() != d.Sum() {
		t.Fatal("equal input, different digests")
	}
	d.Ints(0)
	if c.Sum() == d.Sum() {
		t.Fatal("an extra zero went unnoticed")
	}
}
