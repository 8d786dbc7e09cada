package fsm

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// CronBytesMax is the longest cron expression a schedule may carry.
const CronBytesMax = 128

// cronSearchYears bounds how far ahead a cron expression's next tick is
// looked for: an expression with no tick in that span (30 February) is
// refused when parsed, so a search never runs longer.
const cronSearchYears = 5

// cronSpec is a parsed five-field cron expression, read in UTC: minute
// (0-59), hour (0-23), day of month (1-31), month (1-12) and day of week
// (0-6, Sunday is 0; 7 is Sunday too). Each field is "*", a number, a
// range "a-b", any of those followed by a step "/n" ("a/n" means from a to
// the field's end), or a comma-separated list of them. As in the classic
// cron, when both day fields are restricted (neither starts with "*") a
// day matches either; otherwise both must match. Names (JAN, MON) and the
// "@hourly"-style shorthands are not accepted.
type cronSpec struct {
	minute, hour, dom, month, dow uint64 // bit i set: value i matches
	domStar, dowStar              bool
}

// cronField describes one field of an expression: its name and range.
type cronField struct {
	name     string
	min, max int
}

var cronFields = [5]cronField{
	{"minute", 0, 59}, {"hour", 0, 23}, {"day of month", 1, 31}, {"month", 1, 12}, {"day of week", 0, 7},
}

// ParseCron checks a cron expression (see ScheduleSpec.Cron): it returns
// an ErrInvalidArgument naming the faulty field, or nil.
func ParseCron(expr string) error {
	_, err := parseCron(expr)
	return err
}

// parseCron parses expr; see cronSpec for the syntax.
func parseCron(expr string) (*cronSpec, error) {
	if len(expr) > CronBytesMax {
		return nil, fmt.Errorf("%w: cron expression of %d bytes (at most %d)", ErrInvalidArgument, len(expr), CronBytesMax)
	}
	parts := strings.Fields(expr)
	if len(parts) != len(cronFields) {
		return nil, fmt.Errorf("%w: cron expression %q has %d fields (want 5: minute hour day-of-month month day-of-week)",
			ErrInvalidArgument, expr, len(parts))
	}
	var bits [5]uint64
	for i, p := range parts {
		b, err := parseCronField(p, cronFields[i])
		if err != nil {
			return nil, fmt.Errorf("%w: cron expression %q: %w", ErrInvalidArgument, expr, err)
		}
		bits[i] = b
	}
	c := &cronSpec{minute: bits[0], hour: bits[1], dom: bits[2], month: bits[3], dow: bits[4],
		domStar: parts[2][0] == '*', dowStar: parts[4][0] == '*'}
	if c.dow&(1<<7) != 0 {
		c.dow = c.dow&^(1<<7) | 1 // 7 is Sunday
	}
	start := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	if _, ok := c.next(start); !ok {
		return nil, fmt.Errorf("%w: cron expression %q never fires", ErrInvalidArgument, expr)
	}
	return c, nil
}

// parseCronField parses one comma-separated field into its bit set.
func parseCronField(s string, f cronField) (uint64, error) {
	var bits uint64
	for _, item := range strings.Split(s, ",") {
		lo, hi, step, err := parseCronItem(item, f)
		if err != nil {
			return 0, err
		}
		for v := lo; v <= hi; v += step {
			bits |= 1 << v
		}
	}
	return bits, nil
}

// parseCronItem parses one list item: "*", "n", "a-b", each with an
// optional "/step".
func parseCronItem(item string, f cronField) (lo, hi, step int, err error) {
	rng, stepText, hasStep := strings.Cut(item, "/")
	step = 1
	if hasStep {
		if step, err = cronNumber(stepText, f.name+" step", 1, f.max-f.min+1); err != nil {
			return 0, 0, 0, err
		}
	}
	switch a, b, isRange := strings.Cut(rng, "-"); {
	case rng == "*":
		return f.min, f.max, step, nil
	case isRange:
		if lo, err = cronNumber(a, f.name, f.min, f.max); err != nil {
			return 0, 0, 0, err
		}
		if hi, err = cronNumber(b, f.name, f.min, f.max); err != nil {
			return 0, 0, 0, err
		}
		if hi < lo {
			return 0, 0, 0, fmt.Errorf("%s range %q runs backwards", f.name, rng)
		}
		return lo, hi, step, nil
	default:
		if lo, err = cronNumber(rng, f.name, f.min, f.max); err != nil {
			return 0, 0, 0, err
		}
		if hasStep {
			return lo, f.max, step, nil
		}
		return lo, lo, 1, nil
	}
}

// cronNumber parses a decimal number in min..max.
func cronNumber(s, what string, min, max int) (int, error) {
	if s == "" || len(s) > 2 {
		return 0, fmt.Errorf("%s %q is not a number in %d..%d", what, s, min, max)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min || n > max || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("%s %q is not a number in %d..%d", what, s, min, max)
	}
	return n, nil
}

// dayMatches reports whether the expression's day fields accept t's day.
func (c *cronSpec) dayMatches(t time.Time) bool {
	dom := c.dom&(1<<t.Day()) != 0
	dow := c.dow&(1<<int(t.Weekday())) != 0
	if !c.domStar && !c.dowStar {
		return dom || dow
	}
	return dom && dow
}

// next returns the first tick strictly after t (Unix nanoseconds), and
// false when there is none within cronSearchYears.
func (c *cronSpec) next(after int64) (int64, bool) {
	t := time.Unix(0, after).UTC().Truncate(time.Minute).Add(time.Minute)
	end := t.AddDate(cronSearchYears, 0, 0)
	for t.Before(end) {
		switch {
		case c.month&(1<<int(t.Month())) == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !c.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
		case c.hour&(1<<t.Hour()) == 0:
			t = t.Truncate(time.Hour).Add(time.Hour)
		case c.minute&(1<<t.Minute()) == 0:
			t = t.Add(time.Minute)
		default:
			return t.UnixNano(), true
		}
	}
	return 0, false
}
