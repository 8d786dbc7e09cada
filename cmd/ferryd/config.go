package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/v2"
)

// onFlagSet, when set (by tests), sees parseFlags' flag set once every
// flag is registered.
var onFlagSet func(*flag.FlagSet)

// maxConfigFileBytes bounds the config file ferryd reads.
const maxConfigFileBytes = 1 << 20

// The config file (-config, TOML) sets flags by name: every flag -x-y is
// the key "x-y", or "y" in a table [x] (tables join their name and the
// key with "-"), so a flag added to ferryd is settable from the file with
// nothing more to write. A value is what the flag would take on the
// command line: strings, numbers and booleans as TOML values, durations as
// strings ("1s"), and lists (for -join) as arrays or comma-separated
// strings. A key that names no flag is an error (typos do not pass
// silently). Precedence: a flag given on the command line wins over its
// environment variable, which wins over the file.

// applyConfigFile sets from the file at path every flag that is not in
// skip (those set on the command line or by the environment).
func applyConfigFile(fs *flag.FlagSet, path string, skip map[string]bool) error {
	values, err := readConfigFile(path)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, key := range keys {
		name := strings.ReplaceAll(key, ".", "-")
		f := fs.Lookup(name)
		switch {
		case f == nil || name == "config":
			errs = append(errs, fmt.Errorf("%s: unknown setting %q (no flag -%s)", path, key, name))
			continue
		case skip[name]:
			continue
		}
		v, err := configValue(values[key])
		if err == nil {
			err = f.Value.Set(v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s = %v: not a valid value for -%s: %w", path, key, values[key], name, err))
		}
	}
	return errors.Join(errs...)
}

// readConfigFile parses the TOML file at path into flattened keys ("a.b"
// for key b of table a).
func readConfigFile(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	text, err := io.ReadAll(io.LimitReader(f, maxConfigFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if len(text) > maxConfigFileBytes {
		return nil, fmt.Errorf("config file %s: larger than %d bytes", path, maxConfigFileBytes)
	}
	k := koanf.New(".")
	if err := k.Load(rawBytes(text), toml.Parser()); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return k.All(), nil
}

// configValue renders a parsed TOML value as the flag's command-line text.
func configValue(v any) (string, error) {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			s, err := configValue(e)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		return "", errors.New("a table where a value was expected")
	case string:
		return x, nil
	}
	return fmt.Sprint(v), nil
}

// rawBytes is a koanf provider of bytes already read.
type rawBytes []byte

// ReadBytes returns the bytes.
func (b rawBytes) ReadBytes() ([]byte, error) { return b, nil }

// Read is not supported: the bytes need a parser.
func (b rawBytes) Read() (map[string]any, error) {
	return nil, errors.New("raw bytes need a parser")
}

// newLogHandler returns the log handler -log-format names: "text"
// (logfmt-like key=value) or "json" (one JSON object per line).
func newLogHandler(format string, w io.Writer, level slog.Level) (slog.Handler, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, &usageError{fmt.Errorf("-log-format %q: want json or text", format)}
}
