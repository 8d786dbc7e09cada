package node

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/wire"
)

// DeadReason and EventKind are defined twice: in fsm, whose numbers are
// in every replica's log and snapshots, and in wire, which the client sees
// and which may not import fsm. node converts them by number, so the two
// definitions must name every number alike.

// TestDeadReasonAndEventKind_SameConstantsInFSMAndWire reads the constants
// of both enums from the two packages' sources and requires the same names
// with the same numbers on both sides. wire.DeadAny (0, a filter's "every
// reason") is the one constant fsm has no twin for: there a zero reason in
// a filter means the same without a name.
func TestDeadReasonAndEventKind_SameConstantsInFSMAndWire(t *testing.T) {
	fsmConsts := enumConstants(t, filepath.Join("..", "fsm"), "DeadReason", "EventKind")
	wireConsts := enumConstants(t, filepath.Join("..", "wire"), "DeadReason", "EventKind")
	wireOnly := map[string]bool{"DeadAny": true}
	for _, enum := range []string{"DeadReason", "EventKind"} {
		f, w := fsmConsts[enum], wireConsts[enum]
		if len(f) == 0 || len(w) == 0 {
			t.Fatalf("%d fsm.%s and %d wire.%s constants found", len(f), enum, len(w), enum)
		}
		for name, v := range f {
			wv, ok := w[name]
			switch {
			case !ok:
				t.Errorf("fsm.%s = %d has no wire.%s", name, v, name)
			case wv != v:
				t.Errorf("fsm.%s = %d but wire.%s = %d", name, v, name, wv)
			}
		}
		for name, v := range w {
			if _, ok := f[name]; !ok && !wireOnly[name] {
				t.Errorf("wire.%s = %d has no fsm.%s", name, v, name)
			}
		}
	}
}

// TestDeadReasonAndEventKind_SameNamesForEveryNumber walks every number the
// enums can hold and requires fsm and wire to print it alike, so that a
// number converted by node keeps its meaning.
func TestDeadReasonAndEventKind_SameNamesForEveryNumber(t *testing.T) {
	reasons, kinds := 0, 0
	for v := 0; v <= math.MaxUint8; v++ {
		fr, wr := fsm.DeadReason(v).String(), wire.DeadReason(v).String()
		if v == int(wire.DeadAny) {
			if fr != "unknown" || wr != "any" {
				t.Errorf("reason 0: fsm %q, wire %q; want unknown and any", fr, wr)
			}
		} else if fr != wr {
			t.Errorf("reason %d: fsm says %q, wire %q", v, fr, wr)
		} else if fr != "unknown" {
			reasons++
		}
		fk, wk := fsm.EventKind(v).String(), wire.EventKind(v).String()
		if fk != wk {
			t.Errorf("event kind %d: fsm says %q, wire %q", v, fk, wk)
		} else if fk != "unknown" {
			kinds++
		}
	}
	if reasons == 0 || kinds == 0 {
		t.Fatalf("%d reasons and %d event kinds named", reasons, kinds)
	}
}

// enumConstants returns, for each named type of the package in dir, its
// constants by name with their values. Only the constant declarations are
// type-checked for real: imports resolve to empty packages and the errors
// that follow elsewhere are ignored.
func enumConstants(t *testing.T, dir string, typeNames ...string) map[string]map[string]int64 {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{
		Importer: emptyImporter{},
		Error:    func(error) {},
	}
	pkg, _ := conf.Check(dir, fset, files, nil)
	want := map[string]bool{}
	for _, n := range typeNames {
		want[n] = true
	}
	out := map[string]map[string]int64{}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		c, ok := scope.Lookup(name).(*types.Const)
		if !ok || !c.Exported() {
			continue
		}
		named, ok := c.Type().(*types.Named)
		if !ok || !want[named.Obj().Name()] {
			continue
		}
		v, exact := constant.Int64Val(c.Val())
		if !exact {
			t.Fatalf("%s.%s: value %v", dir, name, c.Val())
		}
		if out[named.Obj().Name()] == nil {
			out[named.Obj().Name()] = map[string]int64{}
		}
		out[named.Obj().Name()][name] = v
	}
	return out
}

// emptyImporter gives every import an empty, complete package.
type emptyImporter struct{}

// Import returns an empty package for path.
func (emptyImporter) Import(path string) (*types.Package, error) {
	p := types.NewPackage(path, filepath.Base(path))
	p.MarkComplete()
	return p, nil
}

// TestDeadLetterOf_EveryFieldReachesWire fills every field of an
// fsm.DeadLetter (and of its history events) with a distinct value and
// requires deadLetterOf to carry each to the wire field of the same name,
// and to leave no wire field unset: a field added on one side and
// forgotten in the conversion fails here.
func TestDeadLetterOf_EveryFieldReachesWire(t *testing.T) {
	var d fsm.DeadLetter
	fillDistinct(reflect.ValueOf(&d).Elem(), new(int))
	const partitionIndex = 7
	w := deadLetterOf(partitionIndex, d)
	if w.Partition != partitionIndex {
		t.Errorf("Partition = %d, want %d", w.Partition, partitionIndex)
	}
	sameFields(t, "DeadLetter", reflect.ValueOf(d), reflect.ValueOf(w), map[string]bool{"Partition": true})
}

// TestDeadFilterOf_EveryFieldReachesFSM is the same for the filter, which
// goes the other way: from the wire to the state machine.
func TestDeadFilterOf_EveryFieldReachesFSM(t *testing.T) {
	var f wire.DeadFilter
	fillDistinct(reflect.ValueOf(&f).Elem(), new(int))
	sameFields(t, "DeadFilter", reflect.ValueOf(f), reflect.ValueOf(deadFilterOf(f)), nil)
}

// fillDistinct sets every field reachable from v (through structs, slices
// and maps) to a non-zero value different from every other field's; next
// counts the values given out. Numbers stay below 256 so that they fit
// any integer field.
func fillDistinct(v reflect.Value, next *int) {
	*next++
	n := *next
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fillDistinct(v.Field(i), next)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range s.Len() {
			fillDistinct(s.Index(i), next)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillDistinct(k, next)
		fillDistinct(e, next)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("v" + itoa(n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n))
	default:
		panic("fillDistinct: no value for " + v.Type().String())
	}
}

// sameFields requires every field of struct from to be found, by name and
// with the same value, in struct to, and every field of to but those in
// toOnly to be found in from. Values compare by kind, so a number converted
// between two named types (fsm.DeadReason and wire.DeadReason) matches.
func sameFields(t *testing.T, path string, from, to reflect.Value, toOnly map[string]bool) {
	t.Helper()
	for i := range from.NumField() {
		name := from.Type().Field(i).Name
		tf := to.FieldByName(name)
		if !tf.IsValid() {
			t.Errorf("%s.%s (%s) has no field of that name in %s", path, name, from.Type(), to.Type())
			continue
		}
		sameValue(t, path+"."+name, from.Field(i), tf)
	}
	for i := range to.NumField() {
		name := to.Type().Field(i).Name
		if _, ok := from.Type().FieldByName(name); !ok && !toOnly[name] {
			t.Errorf("%s.%s (%s) has no field of that name in %s", path, name, to.Type(), from.Type())
		}
	}
}

// sameValue compares two values of the same kind, descending into structs
// (by field name) and slices; strings of different named types compare
// by value.
func sameValue(t *testing.T, path string, a, b reflect.Value) {
	t.Helper()
	if a.Kind() != b.Kind() {
		t.Errorf("%s: %s becomes %s", path, a.Type(), b.Type())
		return
	}
	switch a.Kind() {
	case reflect.Struct:
		sameFields(t, path, a, b, nil)
	case reflect.Slice:
		if a.Len() != b.Len() {
			t.Errorf("%s: %d elements become %d", path, a.Len(), b.Len())
			return
		}
		for i := range a.Len() {
			sameValue(t, path+"["+itoa(i)+"]", a.Index(i), b.Index(i))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if a.Int() != b.Int() {
			t.Errorf("%s: %d becomes %d", path, a.Int(), b.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if a.Uint() != b.Uint() {
			t.Errorf("%s: %d becomes %d", path, a.Uint(), b.Uint())
		}
	case reflect.String:
		if a.String() != b.String() {
			t.Errorf("%s: %q becomes %q", path, a.String(), b.String())
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			t.Errorf("%s: %v becomes %v", path, a.Interface(), b.Interface())
		}
	}
}
