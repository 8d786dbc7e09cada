package node

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// incarnationFile holds the node's incarnation in its data directory.
const incarnationFile = "incarnation"

// loadIncarnation returns the incarnation of the data directory dir, drawing
// and durably storing a fresh random one when the directory has none (it
// is new, or was wiped; fresh is then true). The catalog compares it with
// the one the node registered last: a change means the node lost its
// data, and its replicas must catch up again before they vote
// (meta.Node.Incarnation).
func loadIncarnation(dir string) (inc uint64, fresh bool, err error) {
	path := filepath.Join(dir, incarnationFile)
	data, err := os.ReadFile(path)
	if err == nil {
		inc, perr := strconv.ParseUint(strings.TrimSpace(string(data)), 16, 64)
		if perr != nil || inc == 0 {
			return 0, false, fmt.Errorf("%s: not an incarnation (%q): remove the file only if the data directory is empty", path, data)
		}
		return inc, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return 0, false, fmt.Errorf("read incarnation: %w", err)
	}
	var b [8]byte
	for inc == 0 {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, false, fmt.Errorf("draw incarnation: %w", err)
		}
		inc = binary.LittleEndian.Uint64(b[:])
	}
	if err := writeFileDurably(path, []byte(strconv.FormatUint(inc, 16)+"\n")); err != nil {
		return 0, false, fmt.Errorf("store incarnation: %w", err)
	}
	return inc, true, nil
}

// writeFileDurably writes data to path through a synced temporary file and
// a rename, then syncs the directory: after a crash the file is whole or
// absent.
func writeFileDurably(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
