package wire_test

// Test vectors of the client protocol, for clients written in other
// languages: each file of testdata/vectors holds one frame as this
// package writes it (hex) and its payload decoded as plain JSON. The
// format is described in docs/protocol.md ("Test vectors"). The tests
// below regenerate every file from the Go values and fail on any
// difference (go test ./wire/ -run Vectors -update rewrites them), decode
// every frame back into its Go value, rebuild every payload from its JSON
// alone with the smallest-form msgpack rules a second-language encoder
// follows, and check that docs/protocol.md names every op and code.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ferrymq/ferry/wire"
)

var updateVectors = flag.Bool("update", false, "rewrite testdata/vectors from the Go values")

// vectorDir holds the vector files; protocolDoc is the protocol's description.
const (
	vectorDir    = "testdata/vectors"
	protocolDoc  = "../docs/protocol.md"
	partitionFor = "partition-for"
)

// vectorFile is the JSON form of a vector.
type vectorFile struct {
	Name    string          `json:"name"`
	Doc     string          `json:"doc"`
	From    string          `json:"from"`
	Kind    string          `json:"kind"`
	Op      uint8           `json:"op,omitempty"`
	OpName  string          `json:"op_name,omitempty"`
	Frame   string          `json:"frame"`
	Payload string          `json:"payload"`
	Body    string          `json:"body,omitempty"`
	Value   json.RawMessage `json:"value"`
}

// A decoded msgpack value is nil, bool, uint64, int64, string, binValue,
// []any or orderedMap (a map in wire order).
type (
	binValue   []byte
	orderedMap []keyValue
	keyValue   struct {
		key   string
		value any
	}
)

// MarshalJSON writes {"$bin": hex}.
func (b binValue) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"$bin": hex.EncodeToString(b)})
}

// MarshalJSON writes the map with its keys in wire order.
func (m orderedMap) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, kv := range m {
		k, _ := json.Marshal(kv.key)
		v, err := json.Marshal(kv.value)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// mustBody encodes a body.
func mustBody(v any) []byte {
	b, err := wire.EncodeBody(v)
	if err != nil {
		panic(err)
	}
	return b
}

// encodeVector renders a vector's file; it fails if the encoding is not
// the same twice (a Go map of several keys in a vector).
func encodeVector(v vector) ([]byte, error) {
	var frame, again bytes.Buffer
	if err := wire.WriteFrame(&frame, v.frame); err != nil {
		return nil, err
	}
	if err := wire.WriteFrame(&again, v.frame); err != nil || !bytes.Equal(frame.Bytes(), again.Bytes()) {
		return nil, fmt.Errorf("vector %s: encoding not deterministic (a map with several keys?)", v.name)
	}
	payload := frame.Bytes()[4:]
	value, err := decodeMsgpack(payload)
	if err != nil {
		return nil, fmt.Errorf("vector %s: %w", v.name, err)
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	from := map[bool]string{true: "client", false: "server"}[v.kind == "hello" || v.kind == "request"]
	f := vectorFile{Name: v.name, Doc: v.doc, From: from, Kind: v.kind, Op: uint8(v.op),
		Frame: hex.EncodeToString(frame.Bytes()), Payload: hex.EncodeToString(payload), Value: raw}
	if v.op != 0 {
		f.OpName = v.op.String()
	}
	switch fr := v.frame.(type) {
	case wire.Request:
		f.Body = hex.EncodeToString(fr.Body)
	case wire.Response:
		f.Body = hex.EncodeToString(fr.Body)
	}
	return marshalFile(f)
}

// marshalFile writes indented JSON without HTML escapes, ending in a
// newline.
func marshalFile(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// decodeMsgpack decodes one msgpack value that fills data exactly.
func decodeMsgpack(data []byte) (any, error) {
	r := &mpReader{data: data}
	v, err := r.value()
	if err == nil && r.pos != len(data) {
		err = fmt.Errorf("%d trailing bytes", len(data)-r.pos)
	}
	return v, err
}

// mpReader walks msgpack bytes; it knows the types the protocol uses.
type mpReader struct {
	data []byte
	pos  int
}

func (r *mpReader) take(n int) ([]byte, error) {
	if n < 0 || n > len(r.data)-r.pos {
		return nil, fmt.Errorf("truncated at offset %d", r.pos)
	}
	r.pos += n
	return r.data[r.pos-n : r.pos], nil
}

// num reads a big-endian unsigned number of n bytes.
func (r *mpReader) num(n int) (uint64, error) {
	b, err := r.take(n)
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v, err
}

func (r *mpReader) value() (any, error) {
	b, err := r.take(1)
	if err != nil {
		return nil, err
	}
	c := b[0]
	switch {
	case c <= 0x7f:
		return uint64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c <= 0x8f:
		return r.mapOf(int(c & 0x0f))
	case c <= 0x9f:
		return r.arrayOf(int(c & 0x0f))
	case c <= 0xbf:
		s, err := r.take(int(c & 0x1f))
		return string(s), err
	case c == 0xc0:
		return nil, nil
	case c == 0xc2 || c == 0xc3:
		return c == 0xc3, nil
	case c >= 0xcc && c <= 0xcf:
		n, err := r.num(1 << (c - 0xcc))
		return n, err
	case c >= 0xd0 && c <= 0xd3:
		size := 1 << (c - 0xd0)
		n, err := r.num(size)
		shift := 64 - 8*size
		return int64(n<<shift) >> shift, err
	}
	return r.sized(c)
}

// sized reads the length-prefixed kinds: str, bin, array and map.
func (r *mpReader) sized(c byte) (any, error) {
	sizes := map[byte]int{0xd9: 1, 0xda: 2, 0xdb: 4, 0xc4: 1, 0xc5: 2, 0xc6: 4, 0xdc: 2, 0xdd: 4, 0xde: 2, 0xdf: 4}
	size, ok := sizes[c]
	if !ok {
		return nil, fmt.Errorf("msgpack byte %#x at offset %d is not used by the protocol", c, r.pos-1)
	}
	n64, err := r.num(size)
	if err != nil {
		return nil, err
	}
	n := int(n64)
	switch c {
	case 0xdc, 0xdd:
		return r.arrayOf(n)
	case 0xde, 0xdf:
		return r.mapOf(n)
	}
	b, err := r.take(n)
	if c >= 0xd9 {
		return string(b), err
	}
	return binValue(bytes.Clone(b)), err
}

func (r *mpReader) arrayOf(n int) (any, error) {
	out := make([]any, 0, min(n, 1024))
	for range n {
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (r *mpReader) mapOf(n int) (any, error) {
	out := orderedMap{}
	for range n {
		k, err := r.value()
		if err != nil {
			return nil, err
		}
		key, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("map key %v is not a string", k)
		}
		v, err := r.value()
		if err != nil {
			return nil, err
		}
		out = append(out, keyValue{key, v})
	}
	return out, nil
}

// partitionForCase is one PartitionFor example.
type partitionForCase struct {
	Key        string `json:"key"`
	Partitions int    `json:"partitions"`
	Partition  int    `json:"partition"`
}

// partitionForFile renders the PartitionFor examples.
func partitionForFile() ([]byte, error) {
	keys := []string{"", "a", "order-1", "order-2", "acct-42", "01KDX6Y2G0A5C3S9W1V7N4Q8R2", "käse", "m-1"}
	var cases []partitionForCase
	for _, k := range keys {
		for _, n := range []int{1, 2, 3, 8, 16, 64} {
			cases = append(cases, partitionForCase{k, n, wire.PartitionFor(k, n)})
		}
	}
	return marshalFile(struct {
		Name  string             `json:"name"`
		Doc   string             `json:"doc"`
		Cases []partitionForCase `json:"cases"`
	}{partitionFor, "Partition of a key (a message's group, or its id when it has no group): " +
		"FNV-1a 32-bit of the key's UTF-8 bytes modulo the partition count; 0 for an empty key or a count below 2.", cases})
}

// wantFiles renders every file of the vector directory, by file name.
func wantFiles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, v := range allVectors() {
		b, err := encodeVector(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := out[v.name+".json"]; dup {
			t.Fatalf("two vectors named %s", v.name)
		}
		out[v.name+".json"] = b
	}
	b, err := partitionForFile()
	if err != nil {
		t.Fatal(err)
	}
	out[partitionFor+".json"] = b
	return out
}

// TestVectors_MatchTheEncoder re-encodes every vector from its Go value
// and compares it with its file; -update rewrites the directory.
func TestVectors_MatchTheEncoder(t *testing.T) {
	want := wantFiles(t)
	if *updateVectors {
		writeVectors(t, want)
	}
	names, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range names {
		if _, ok := want[filepath.Base(path)]; !ok {
			t.Errorf("%s: no Go value makes this vector (remove it, or run go test ./wire/ -run Vectors -update)", path)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		got, err := os.ReadFile(filepath.Join(vectorDir, name))
		if err != nil {
			t.Errorf("%v (run go test ./wire/ -run Vectors -update)", err)
			continue
		}
		if !bytes.Equal(got, want[name]) {
			t.Errorf("%s differs from what the encoder writes now (%s); if the change is intended, "+
				"run go test ./wire/ -run Vectors -update and say so in docs/protocol.md", name, firstDiff(got, want[name]))
		}
	}
}

// writeVectors replaces the directory's JSON files with want.
func writeVectors(t *testing.T, want map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(vectorDir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	for _, path := range old {
		if _, ok := want[filepath.Base(path)]; !ok {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, b := range want {
		if err := os.WriteFile(filepath.Join(vectorDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// firstDiff names the first line where two files differ.
func firstDiff(got, want []byte) string {
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) && i < len(wl); i++ {
		if gl[i] != wl[i] {
			return fmt.Sprintf("line %d: file has %.120q, encoder gives %.120q", i+1, gl[i], wl[i])
		}
	}
	return fmt.Sprintf("the file has %d lines, the encoder gives %d", len(gl), len(wl))
}

// readVectorFile reads a vector file.
func readVectorFile(name string) (vectorFile, error) {
	var f vectorFile
	b, err := os.ReadFile(filepath.Join(vectorDir, name))
	if err != nil {
		return f, fmt.Errorf("%w (run go test ./wire/ -run Vectors -update)", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// TestVectors_DecodeToTheirGoValues reads every vector file's frame with
// the package's reader and decodes its body, comparing with the Go value.
func TestVectors_DecodeToTheirGoValues(t *testing.T) {
	for _, v := range allVectors() {
		f, err := readVectorFile(v.name + ".json")
		if err != nil {
			t.Error(err)
			continue
		}
		frame, err := hex.DecodeString(f.Frame)
		if err != nil {
			t.Fatalf("%s: frame: %v", v.name, err)
		}
		if err := decodeVector(v, frame); err != nil {
			t.Errorf("vector %s: %v", v.name, err)
		}
	}
}

// decodeVector decodes frame as v's kind of frame and compares.
func decodeVector(v vector, frame []byte) error {
	rd := wire.NewReader(bufio.NewReader(bytes.NewReader(frame)))
	var got, body any
	switch want := v.frame.(type) {
	case wire.Hello:
		var h wire.Hello
		if err := rd.Read(&h); err != nil || wire.CheckHello(h) != nil {
			return fmt.Errorf("hello: %v, %v", err, wire.CheckHello(h))
		}
		got = h
	case wire.Request:
		req, err := rd.ReadRequest()
		if err != nil {
			return err
		}
		body = wire.NewRequestBody(req.Op)
		if err := req.Decode(body); err != nil {
			return err
		}
		got, req.Body = req, want.Body // the body is compared decoded
	case wire.Response:
		resp, err := rd.ReadResponse()
		if err != nil {
			return err
		}
		if body = wire.NewResponseBody(v.op); v.kind == "welcome" {
			body = new(wire.Welcome)
		}
		if err := resp.Decode(body); err != nil && resp.Code == wire.CodeOK {
			return err
		}
		got, resp.Body = resp, want.Body // a failure's code and text are compared in the envelope
	}
	if !reflect.DeepEqual(got, v.frame) {
		return fmt.Errorf("envelope decodes as %+v, want %+v", got, v.frame)
	}
	if v.body != nil && !reflect.DeepEqual(body, v.body) {
		return fmt.Errorf("body decodes as %+v, want %+v", body, v.body)
	}
	if _, err := rd.ReadRaw(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("bytes after the frame: %v", err)
	}
	return nil
}

// TestVectors_PayloadFromJSONAlone rebuilds every vector file's payload
// from its "value" with the smallest-form msgpack rules of
// docs/protocol.md, reading only the file: what a second-language encoder
// that follows them produces, byte for byte.
func TestVectors_PayloadFromJSONAlone(t *testing.T) {
	for _, v := range allVectors() {
		f, err := readVectorFile(v.name + ".json")
		if err != nil {
			t.Error(err)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(f.Value))
		dec.UseNumber()
		var enc bytes.Buffer
		if err := packJSON(dec, &enc); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if got := hex.EncodeToString(enc.Bytes()); got != f.Payload {
			t.Errorf("%s: the JSON value packs as\n%s\nwant\n%s", v.name, got, f.Payload)
		}
		var prefix [4]byte
		binary.BigEndian.PutUint32(prefix[:], uint32(enc.Len()))
		if f.Frame != hex.EncodeToString(prefix[:])+f.Payload {
			t.Errorf("%s: frame is not the length prefix and the payload", v.name)
		}
		if f.Body != "" && !strings.Contains(f.Payload, f.Body) {
			t.Errorf("%s: body is not part of the payload", v.name)
		}
	}
}

// packJSON encodes the next JSON value of dec as msgpack in the smallest
// form: an object {"$bin": hex} is bin, other objects maps (keys in
// order), integers the shortest int or uint form.
func packJSON(dec *json.Decoder, w *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok := tok.(type) {
	case nil:
		w.WriteByte(0xc0)
	case bool:
		w.WriteByte(map[bool]byte{false: 0xc2, true: 0xc3}[tok])
	case json.Number:
		return packNumber(tok, w)
	case string:
		packHead(w, len(tok), 0xa0, 32, strForms)
		w.WriteString(tok)
	case json.Delim:
		return packContainer(tok, dec, w)
	}
	return nil
}

// packContainer packs an array or an object whose opening delimiter was
// read.
func packContainer(open json.Delim, dec *json.Decoder, w *bytes.Buffer) error {
	var items bytes.Buffer
	n := 0
	for dec.More() {
		if open == '{' {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			if key == "$bin" && n == 0 {
				return packBin(dec, w)
			}
			packHead(&items, len(key.(string)), 0xa0, 32, strForms)
			items.WriteString(key.(string))
		}
		if err := packJSON(dec, &items); err != nil {
			return err
		}
		n++
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return err
	}
	if open == '[' {
		packHead(w, n, 0x90, 16, arrayForms)
	} else {
		packHead(w, n, 0x80, 16, mapForms)
	}
	w.Write(items.Bytes())
	return nil
}

// packBin packs {"$bin": hex} once its key was read.
func packBin(dec *json.Decoder, w *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	b, err := hex.DecodeString(tok.(string))
	if err != nil {
		return err
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	packHead(w, len(b), 0, 0, [3]byte{0xc4, 0xc5, 0xc6})
	w.Write(b)
	return nil
}

// Header forms: a fix form for n below fixMax (fix | n), then the codes
// of the 8-, 16- and 32-bit lengths (0: no 8-bit form).
var (
	strForms   = [3]byte{0xd9, 0xda, 0xdb}
	arrayForms = [3]byte{0, 0xdc, 0xdd}
	mapForms   = [3]byte{0, 0xde, 0xdf}
)

// packHead writes a str, bin, array or map header in its shortest form.
func packHead(w *bytes.Buffer, n int, fix byte, fixMax int, forms [3]byte) {
	switch {
	case n < fixMax:
		w.WriteByte(fix | byte(n))
	case forms[0] != 0 && n <= math.MaxUint8:
		writeBE(w, forms[0], uint64(n), 1)
	case n <= math.MaxUint16:
		writeBE(w, forms[1], uint64(n), 2)
	default:
		writeBE(w, forms[2], uint64(n), 4)
	}
}

// writeBE writes code and then the low size bytes of v, big-endian.
func writeBE(w *bytes.Buffer, code byte, v uint64, size int) {
	w.WriteByte(code)
	for i := size - 1; i >= 0; i-- {
		w.WriteByte(byte(v >> (8 * i)))
	}
}

// packNumber writes an integer in its shortest form: positive fixint or
// uint 8..64 when not negative, else negative fixint or int 8..64.
func packNumber(n json.Number, w *bytes.Buffer) error {
	if u, err := strconv.ParseUint(n.String(), 10, 64); err == nil {
		if u <= 0x7f {
			w.WriteByte(byte(u))
			return nil
		}
		for k, limit := range []uint64{math.MaxUint8, math.MaxUint16, math.MaxUint32, math.MaxUint64} {
			if u <= limit {
				writeBE(w, 0xcc+byte(k), u, 1<<k)
				return nil
			}
		}
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return fmt.Errorf("number %s is not an integer of 64 bits", n)
	}
	if i >= -32 {
		w.WriteByte(byte(int8(i)))
		return nil
	}
	for k, limit := range []int64{math.MinInt8, math.MinInt16, math.MinInt32, math.MinInt64} {
		if i >= limit {
			writeBE(w, 0xd0+byte(k), uint64(i), 1<<k)
			break
		}
	}
	return nil
}

// TestVectors_CoverEveryOpAndCode fails when an op has no request and
// answer vector, or a code appears in no vector.
func TestVectors_CoverEveryOpAndCode(t *testing.T) {
	reqs, resps, codes := map[wire.Op]bool{}, map[wire.Op]bool{}, map[wire.Code]bool{}
	for _, v := range allVectors() {
		switch f := v.frame.(type) {
		case wire.Request:
			reqs[f.Op] = true
		case wire.Response:
			codes[f.Code] = true
			if f.Code == wire.CodeOK && v.op != 0 {
				resps[v.op] = true
			}
		}
		if v.body != nil {
			collectCodes(reflect.ValueOf(v.body), codes)
		}
	}
	for op := wire.Op(1); op.Valid(); op++ {
		if !reqs[op] || !resps[op] {
			t.Errorf("op %d (%s) lacks a request or an answer vector", op, op)
		}
	}
	for c := wire.Code(0); c.Known(); c++ {
		if !codes[c] {
			t.Errorf("code %d (%s) appears in no vector", c, c)
		}
	}
}

// collectCodes records every wire.Code field reachable from v.
func collectCodes(v reflect.Value, codes map[wire.Code]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			collectCodes(v.Elem(), codes)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			collectCodes(v.Field(i), codes)
		}
	case reflect.Slice:
		for i := range v.Len() {
			collectCodes(v.Index(i), codes)
		}
	}
	if v.Type() == reflect.TypeFor[wire.Code]() && v.Uint() != 0 {
		codes[wire.Code(v.Uint())] = true
	}
}

// The protocol document's conventions the test reads: each op has a
// heading "### NAME (op N)", and the table of the section whose heading
// starts with codeSection has rows "| N | NAME | meaning | yes-or-no |
// what to do |" whose fourth cell is Code.Retryable.
const codeSection = "## Error codes"

var (
	opHeading = regexp.MustCompile(`^### ([a-z-]+) \(op ([0-9]+)\)$`)
	codeRow   = regexp.MustCompile(`^\| *([0-9]+) *\| *([a-z ]+?) *\|[^|]*\| *(yes|no) *\|`)
)

// TestVectors_DocNamesEveryOpAndCode fails, naming them, when
// docs/protocol.md lacks an op of op.go or a code of code.go, names one
// that does not exist, or says a code is retryable when Code.Retryable
// says otherwise.
func TestVectors_DocNamesEveryOpAndCode(t *testing.T) {
	text, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatalf("%v: the protocol document must exist", err)
	}
	ops, codes, retry := map[int]string{}, map[int]string{}, map[int]string{}
	inCodes := false
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "## ") {
			inCodes = strings.HasPrefix(line, codeSection)
		}
		if m := opHeading.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[2])
			ops[n] = m[1]
		}
		if m := codeRow.FindStringSubmatch(line); inCodes && m != nil {
			n, _ := strconv.Atoi(m[1])
			codes[n], retry[n] = m[2], m[3]
		}
	}
	for op := wire.Op(1); op.Valid(); op++ {
		if got, ok := ops[int(op)]; !ok || got != op.String() {
			t.Errorf("%s: no heading %q for op %d", protocolDoc, fmt.Sprintf("### %s (op %d)", op, op), op)
		}
	}
	for n, name := range ops {
		if n > 255 || !wire.Op(n).Valid() {
			t.Errorf("%s: op %d (%s) is not an op of wire/op.go", protocolDoc, n, name)
		}
	}
	for c := wire.Code(0); c.Known(); c++ {
		want := map[bool]string{true: "yes", false: "no"}[c.Retryable()]
		switch got, ok := codes[int(c)]; {
		case !ok || got != c.String():
			t.Errorf("%s: no error table row %q for code %d", protocolDoc, fmt.Sprintf("| %d | %s | ... | %s |", c, c, want), c)
		case retry[int(c)] != want:
			t.Errorf("%s: code %d (%s) marked retryable %q, Code.Retryable says %q", protocolDoc, c, c, retry[int(c)], want)
		}
	}
	for n, name := range codes {
		if n > math.MaxUint16 || !wire.Code(n).Known() {
			t.Errorf("%s: code %d (%s) is not a code of wire/code.go", protocolDoc, n, name)
		}
	}
}
