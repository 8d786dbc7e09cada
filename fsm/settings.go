package fsm

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// SettingKind says what a setting's number counts.
type SettingKind uint8

// Setting kinds. Append-only.
const (
	// KindCount is a number of things (receives, messages, ids).
	KindCount SettingKind = 1
	// KindBytes is a number of bytes.
	KindBytes SettingKind = 2
	// KindDuration is a time.Duration in nanoseconds.
	KindDuration SettingKind = 3
	// KindSwitch is 0 (off) or 1 (on).
	KindSwitch SettingKind = 4
)

// String names the kind.
func (k SettingKind) String() string {
	switch k {
	case KindCount:
		return "count"
	case KindBytes:
		return "bytes"
	case KindDuration:
		return "duration"
	case KindSwitch:
		return "switch"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Setting describes one field of QueueConfig. The table of them (see
// Settings) is the one place where a queue setting's name, default, range
// and meaning of zero are written: DefaultQueueConfig and Validate read it,
// the server reports it to clients, and the CLI's flags, the JSON views and
// the dashboard are derived from it.
type Setting struct {
	// Name is the setting's name on the wire and in JSON: the msgpack tag
	// of its QueueConfig field, e.g. "max_depth".
	Name string
	// Kind says what the number counts.
	Kind SettingKind
	// Default is the value a queue created without the setting gets.
	Default int64
	// Min and Max bound the value, both included. Max is 0 when there is
	// no upper bound.
	Min, Max int64
	// Zero says what 0 means when 0 is in range and means something other
	// than the number itself: "no limit", "off" or "keep"; empty otherwise.
	Zero string
	// Help says in one line what the setting does.
	Help string
	// field is the index of the QueueConfig field, found from Name.
	field int
}

// init binds each row to its QueueConfig field and asserts that the table
// and the struct agree: every field has exactly one row, in field order, of
// an integer type, with a default inside its own range. A mismatch is a
// programming error that would let a setting go unchecked.
func init() {
	t := reflect.TypeOf(QueueConfig{})
	if t.NumField() != len(settingsTable) {
		panic(fmt.Sprintf("fsm: QueueConfig has %d fields but the settings table %d rows", t.NumField(), len(settingsTable)))
	}
	for i := range settingsTable {
		s := &settingsTable[i]
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("msgpack"), ","); tag != s.Name {
			panic(fmt.Sprintf("fsm: QueueConfig field %d (%s) is %q on the wire, the settings table says %q", i, f.Name, tag, s.Name))
		}
		if k := f.Type.Kind(); k != reflect.Int && k != reflect.Int64 {
			panic(fmt.Sprintf("fsm: QueueConfig.%s is a %s, want an integer", f.Name, f.Type))
		}
		if s.check(s.Default) != "" || s.Help == "" || s.Kind == 0 {
			panic(fmt.Sprintf("fsm: settings table row %s: default out of range, or no help or kind", s.Name))
		}
		s.field = i
	}
}

// Settings returns the table of queue settings in QueueConfig's field
// order. The slice is a copy.
func Settings() []Setting { return append([]Setting(nil), settingsTable...) }

// FieldName is the Go name of the setting's QueueConfig field, as
// Validate's errors name it.
func (s Setting) FieldName() string { return reflect.TypeOf(QueueConfig{}).Field(s.field).Name }

// Get returns the setting's value in c.
func (s Setting) Get(c QueueConfig) int64 { return reflect.ValueOf(c).Field(s.field).Int() }

// Set stores v as the setting's value in c.
func (s Setting) Set(c *QueueConfig, v int64) { reflect.ValueOf(c).Elem().Field(s.field).SetInt(v) }

// Format writes v as the setting's kind reads: a duration as "30s" or
// "12h", bytes and counts as decimal numbers.
func (s Setting) Format(v int64) string {
	if s.Kind == KindDuration {
		return shortDuration(time.Duration(v))
	}
	return strconv.FormatInt(v, 10)
}

// Range describes the allowed values, as Validate's errors say it, e.g.
// "between 0 and 12h" or "not negative".
func (s Setting) Range() string {
	if s.Max == 0 {
		return "not negative"
	}
	return "between " + s.Format(s.Min) + " and " + s.Format(s.Max)
}

// check returns the rule v breaks, or "" when v is in range.
func (s Setting) check(v int64) string {
	if v < s.Min || s.Max != 0 && v > s.Max {
		return "must be " + s.Range()
	}
	return ""
}

// shortDuration formats d without trailing zero units: 12h, 1h30m, 45s.
func shortDuration(d time.Duration) string {
	str := d.String()
	if strings.HasSuffix(str, "m0s") {
		str = strings.TrimSuffix(str, "0s")
	}
	if strings.HasSuffix(str, "h0m") {
		str = strings.TrimSuffix(str, "0m")
	}
	return str
}
