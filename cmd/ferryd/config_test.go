package main

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ferryd.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigFile_FlagsWinOverEnvWhichWinsOverFile(t *testing.T) {
	path := writeConfig(t, `
id = "from-file"
insecure = true
cluster = "file-cluster"
log-level = "debug"
bootstrap-expect = 5
join = ["10.0.0.2:7301", "10.0.0.3:7301"]
[raft]
election-timeout = "3s"
`)
	t.Setenv("FERRY_CLUSTER", "env-cluster")
	t.Setenv("FERRY_LOG_LEVEL", "warn")
	o, err := parseFlags([]string{"-config", path, "-log-level", "error"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ what, got, want string }{
		{"id (file only)", o.id, "from-file"},
		{"cluster (env over file)", o.cluster, "env-cluster"},
		{"log-level (flag over env and file)", o.logLevel, "error"},
		{"bootstrap-expect (file)", strconv.Itoa(o.bootstrapExpect), "5"},
		{"join (array)", o.join, "10.0.0.2:7301,10.0.0.3:7301"},
		{"raft-election-timeout (table)", o.raft.election.String(), (3 * time.Second).String()},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
	}
	if !o.tls.insecure {
		t.Error("insecure from the file not applied")
	}
}

func TestConfigFile_FromEnvironment(t *testing.T) {
	t.Setenv("FERRY_CONFIG", writeConfig(t, "id = \"n7\"\ninsecure = true\n"))
	o, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil || o.id != "n7" {
		t.Fatalf("got id %q, %v; want n7 from FERRY_CONFIG's file", o.id, err)
	}
}

// TestConfigFile_EveryFlagHasAKey writes every registered flag, by name,
// with its default into a file: each must be accepted, so a flag added to
// ferryd is settable from the file without more code.
func TestConfigFile_EveryFlagHasAKey(t *testing.T) {
	defaults := map[string]string{}
	onFlagSet = func(fs *flag.FlagSet) {
		fs.VisitAll(func(f *flag.Flag) { defaults[f.Name] = f.DefValue })
	}
	t.Cleanup(func() { onFlagSet = nil })
	if _, err := parseFlags([]string{"-id", "n1", "-insecure"}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for name, def := range defaults {
		switch name {
		case "config", "id", "insecure":
			continue
		}
		fmt.Fprintf(&text, "%s = %q\n", name, def)
	}
	text.WriteString("id = \"n1\"\ninsecure = true\n")
	if len(defaults) < 30 {
		t.Fatalf("only %d flags found", len(defaults))
	}
	if _, err := parseFlags([]string{"-config", writeConfig(t, text.String())}, &bytes.Buffer{}); err != nil {
		t.Fatalf("a file naming every flag (%d) with its default: %v", len(defaults), err)
	}
}

func TestConfigFile_Errors(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"unknown key":   {"id = \"n1\"\ninsecure = true\nno-such-flag = 1\n", `unknown setting "no-such-flag"`},
		"bad value":     {"id = \"n1\"\ninsecure = true\nbootstrap-expect = \"three\"\n", "bootstrap-expect"},
		"not toml":      {"id = = n1\n", "config file"},
		"config itself": {"config = \"other.toml\"\n", `unknown setting "config"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseFlags([]string{"-config", writeConfig(t, tc.text)}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
			if code := exitCode(err, &bytes.Buffer{}); code != 2 {
				t.Fatalf("exit code %d, want 2 (usage)", code)
			}
		})
	}
	if _, err := parseFlags([]string{"-config", filepath.Join(t.TempDir(), "missing.toml")}, &bytes.Buffer{}); err == nil {
		t.Fatal("a missing config file was accepted")
	}
	big := writeConfig(t, "# "+strings.Repeat("x", maxConfigFileBytes)+"\n")
	if _, err := parseFlags([]string{"-config", big}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
}

func TestConfigFile_ExampleIsValid(t *testing.T) {
	o, err := parseFlags([]string{"-config", "../../docs/ferryd.example.toml"}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("docs/ferryd.example.toml: %v", err)
	}
	if o.id != "node1" || o.logFormat != "json" || o.join != "10.0.0.12:7301,10.0.0.13:7301" || o.raft.snapshotThreshold != 8192 {
		t.Fatalf("example parsed as %+v", o)
	}
}

func TestLogFormat(t *testing.T) {
	var buf bytes.Buffer
	h, err := newLogHandler("json", &buf, slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	slog.New(h).Info("hello", "k", 1)
	if !strings.HasPrefix(buf.String(), "{") || !strings.Contains(buf.String(), `"msg":"hello"`) {
		t.Fatalf("json log line %q", buf.String())
	}
	if _, err := newLogHandler("xml", &buf, slog.LevelInfo); err == nil {
		t.Fatal("-log-format xml accepted")
	}
}
