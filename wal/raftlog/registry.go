package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The registry maps group names to small ids. It lives in one file,
// replaced atomically on every change (temporary file, fsync, rename,
// directory fsync; groups created while a save runs share the next one,
// see register.go). Ids are never reused: nextID only grows, so a record
// whose id is below nextID but absent from the file belongs to a dropped
// group.
//
//	ferry-raftlog-groups 1
//	next <nextID>
//	<id> <name>          one line per group, ascending id
//	crc <crc32c of every byte above, 8 hex digits>
const (
	registryFileName = "groups"
	registryTempName = "groups.tmp"
	registryMagic    = "ferry-raftlog-groups 1"
	// registryBytesMax bounds the file: GroupsLimit lines of at most
	// 10+1+GroupNameBytesMax+1 bytes, plus the fixed lines.
	registryBytesMax = GroupsLimit*(12+GroupNameBytesMax) + 128
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// registry is the in-memory copy of the registry file.
type registry struct {
	dir    string
	nextID uint32
	ids    map[string]uint32
}

// checkGroupName returns an error wrapping ErrBadGroupName if name is not
// 1..GroupNameBytesMax bytes of printable ASCII.
func checkGroupName(name string) error {
	if name == "" || len(name) > GroupNameBytesMax {
		return fmt.Errorf("%w: %d bytes, want 1 to %d", ErrBadGroupName, len(name), GroupNameBytesMax)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%w: byte %d is 0x%02x, not printable ASCII", ErrBadGroupName, i, c)
		}
	}
	return nil
}

// loadRegistry reads the registry in dir; a missing file is an empty
// registry.
func loadRegistry(dir string) (*registry, error) {
	r := &registry{dir: dir, nextID: 1, ids: make(map[string]uint32)}
	b, err := os.ReadFile(filepath.Join(dir, registryFileName))
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raftlog: read group registry: %w", err)
	}
	if err := r.parse(b); err != nil {
		return nil, fmt.Errorf("%w: group registry %s: %v", ErrCorrupt, filepath.Join(dir, registryFileName), err)
	}
	return r, nil
}

// parse fills r from the file contents b.
func (r *registry) parse(b []byte) error {
	if len(b) > registryBytesMax {
		return fmt.Errorf("%d bytes, more than %d", len(b), registryBytesMax)
	}
	i := bytes.LastIndex(b, []byte("crc "))
	if i < 0 || !bytes.HasSuffix(b, []byte("\n")) {
		return errors.New("no checksum line")
	}
	sum, err := strconv.ParseUint(strings.TrimSpace(string(b[i+4:])), 16, 32)
	if err != nil || uint32(sum) != crc32.Checksum(b[:i], crcTable) {
		return errors.New("checksum mismatch")
	}
	lines := strings.Split(strings.TrimSuffix(string(b[:i]), "\n"), "\n")
	if len(lines) < 2 || lines[0] != registryMagic {
		return errors.New("bad header line")
	}
	next, ok := strings.CutPrefix(lines[1], "next ")
	n, err := strconv.ParseUint(next, 10, 32)
	if !ok || err != nil || n < 1 {
		return fmt.Errorf("bad line %q", lines[1])
	}
	r.nextID = uint32(n)
	for _, line := range lines[2:] {
		idText, name, ok := strings.Cut(line, " ")
		id, err := strconv.ParseUint(idText, 10, 32)
		if !ok || err != nil || id == 0 || uint32(id) >= r.nextID || checkGroupName(name) != nil {
			return fmt.Errorf("bad group line %q", line)
		}
		if _, dup := r.ids[name]; dup {
			return fmt.Errorf("group %q listed twice", name)
		}
		r.ids[name] = uint32(id)
	}
	return nil
}

// encode renders the registry file.
func (r *registry) encode() []byte {
	type pair struct {
		id   uint32
		name string
	}
	pairs := make([]pair, 0, len(r.ids))
	for name, id := range r.ids {
		pairs = append(pairs, pair{id, name})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].id < pairs[j].id })
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nnext %d\n", registryMagic, r.nextID)
	for _, p := range pairs {
		fmt.Fprintf(&b, "%d %s\n", p.id, p.name)
	}
	fmt.Fprintf(&b, "crc %08x\n", crc32.Checksum(b.Bytes(), crcTable))
	return b.Bytes()
}

// save replaces the registry file with r's contents durably.
func (r *registry) save() error { return r.write(r.encode()) }

// write replaces the registry file with data (an encode of the registry).
func (r *registry) write(data []byte) error {
	tmp := filepath.Join(r.dir, registryTempName)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("raftlog: write group registry: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(r.dir, registryFileName))
	}
	if err == nil {
		err = syncDir(r.dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("raftlog: write group registry: %w", err)
	}
	return nil
}

// syncDir fsyncs a directory so that a rename in it persists.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
