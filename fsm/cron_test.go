package fsm

import (
	"errors"
	"testing"
	"time"
)

func utc(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UnixNano()
}

func TestCron_Next(t *testing.T) {
	cases := []struct {
		expr, after, want string
	}{
		{"* * * * *", "2026-03-01T09:00:00Z", "2026-03-01T09:01:00Z"},
		{"* * * * *", "2026-03-01T09:00:59Z", "2026-03-01T09:01:00Z"},
		{"*/5 * * * *", "2026-03-01T09:03:10Z", "2026-03-01T09:05:00Z"},
		{"0 9 * * *", "2026-03-01T09:00:00Z", "2026-03-02T09:00:00Z"},
		{"30 23 31 12 *", "2026-03-01T00:00:00Z", "2026-12-31T23:30:00Z"},
		{"0 0 29 2 *", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"0 12 * * 1-5", "2026-12-05T13:00:00Z", "2026-12-07T12:00:00Z"}, // Saturday -> Monday
		{"0 12 * * 7", "2026-12-05T13:00:00Z", "2026-12-06T12:00:00Z"},   // 7 is Sunday
		{"0 0 1 * 1", "2026-12-02T00:00:00Z", "2026-12-07T00:00:00Z"},    // day of month or Monday
		{"5,10-12/2 3 * 1,6 *", "2026-01-01T03:12:00Z", "2026-01-02T03:05:00Z"},
		{"15/20 * * * *", "2026-01-01T00:40:00Z", "2026-01-01T00:55:00Z"},
	}
	for _, c := range cases {
		spec, err := parseCron(c.expr)
		if err != nil {
			t.Fatalf("%q: %v", c.expr, err)
		}
		got, ok := spec.next(utc(c.after))
		if !ok || got != utc(c.want) {
			t.Errorf("%q after %s = %s, %v; want %s", c.expr, c.after, time.Unix(0, got).UTC().Format(time.RFC3339), ok, c.want)
		}
	}
}

func TestCron_Refused(t *testing.T) {
	for _, expr := range []string{
		"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *",
		"* * * 13 *", "* * * * 8", "5-1 * * * *", "*/0 * * * *", "a * * * *", "-1 * * * *",
		"+1 * * * *", "1,,2 * * * *", "0 0 30 2 *", "0 0 31 4 *", "*/61 * * * *", "1-2-3 * * * *",
		string(make([]byte, CronBytesMax+1)),
	} {
		if err := ParseCron(expr); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q: got %v, want ErrInvalidArgument", expr, err)
		}
	}
}

func TestCron_TicksIncrease(t *testing.T) {
	spec, err := parseCron("*/7 1-3 * * *")
	if err != nil {
		t.Fatal(err)
	}
	at := utc("2026-01-01T00:00:00Z")
	for i := 0; i < 500; i++ {
		next, ok := spec.next(at)
		if !ok || next <= at || next%int64(time.Minute) != 0 {
			t.Fatalf("tick %d after %d: %d, %v", i, at, next, ok)
		}
		if h := time.Unix(0, next).UTC().Hour(); h < 1 || h > 3 {
			t.Fatalf("tick at hour %d", h)
		}
		at = next
	}
}
