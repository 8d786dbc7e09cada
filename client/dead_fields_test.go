package client

import (
	"reflect"
	"testing"
	"time"

	"github.com/ferrymq/ferry/wire"
)

// TestDeadLetterFromWire_EveryFieldArrives fills every field of a
// wire.DeadLetter (and of its history events) with a distinct value and
// requires deadLetterFromWire to carry each to the field of the same name
// (Unix nanoseconds becoming a time.Time), with no client field left
// unset: a field added to the protocol and forgotten here fails.
func TestDeadLetterFromWire_EveryFieldArrives(t *testing.T) {
	var w wire.DeadLetter
	n := 0
	fillWire(reflect.ValueOf(&w).Elem(), &n)
	fieldsArrive(t, "DeadLetter", reflect.ValueOf(w), reflect.ValueOf(deadLetterFromWire(w)))
}

// fillWire sets every field reachable from v to a non-zero value of its
// own, counting with next (kept below 256 to fit any integer).
func fillWire(v reflect.Value, next *int) {
	*next++
	n := *next
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fillWire(v.Field(i), next)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range s.Len() {
			fillWire(s.Index(i), next)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillWire(k, next)
		fillWire(e, next)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("v" + string(rune('a'+n%26)) + string(rune('a'+n/26)))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n))
	default:
		panic("fillWire: no value for " + v.Type().String())
	}
}

// fieldsArrive requires every field of struct from to be in struct to,
// by name and with the same value, and every field of to to be in from.
func fieldsArrive(t *testing.T, path string, from, to reflect.Value) {
	t.Helper()
	for i := range from.NumField() {
		name := from.Type().Field(i).Name
		tf := to.FieldByName(name)
		if !tf.IsValid() {
			t.Errorf("%s.%s (%s) has no field of that name in %s", path, name, from.Type(), to.Type())
			continue
		}
		valueArrives(t, path+"."+name, from.Field(i), tf)
	}
	for i := range to.NumField() {
		if _, ok := from.Type().FieldByName(to.Type().Field(i).Name); !ok {
			t.Errorf("%s.%s (%s) has no field of that name in %s", path, to.Type().Field(i).Name, to.Type(), from.Type())
		}
	}
}

// valueArrives compares a wire value with the client's: by kind, with
// Unix nanoseconds against a time.Time.
func valueArrives(t *testing.T, path string, a, b reflect.Value) {
	t.Helper()
	if tm, ok := b.Interface().(time.Time); ok {
		if a.Kind() != reflect.Int64 || tm.UnixNano() != a.Int() {
			t.Errorf("%s: %v becomes %v", path, a.Interface(), tm)
		}
		return
	}
	if a.Kind() != b.Kind() {
		t.Errorf("%s: %s becomes %s", path, a.Type(), b.Type())
		return
	}
	switch a.Kind() {
	case reflect.Struct:
		fieldsArrive(t, path, a, b)
	case reflect.Slice:
		if a.Len() != b.Len() {
			t.Errorf("%s: %d elements become %d", path, a.Len(), b.Len())
			return
		}
		for i := range a.Len() {
			valueArrives(t, path, a.Index(i), b.Index(i))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if a.Int() != b.Int() {
			t.Errorf("%s: %d becomes %d", path, a.Int(), b.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if a.Uint() != b.Uint() {
			t.Errorf("%s: %d becomes %d", path, a.Uint(), b.Uint())
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			t.Errorf("%s: %v becomes %v", path, a.Interface(), b.Interface())
		}
	}
}
