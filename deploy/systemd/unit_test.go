// Package systemd holds the tests of the systemd unit and the sample node
// config next to them: the unit passes `systemd-analyze verify` and keeps
// its sandbox, and ferryd accepts the sample config and runs with it.
package systemd

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	unitPath   = "ferryd.service"
	configPath = "ferryd.toml"
	// installedFerryd and installedConfig are the paths the unit runs.
	installedFerryd = "/usr/local/bin/ferryd"
	installedConfig = "/etc/ferry/ferryd.toml"
)

// ferrydBin is the ferryd binary the tests run, built once by TestMain.
var ferrydBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ferry-systemd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ferrydBin = filepath.Join(dir, "ferryd")
	build := exec.Command("go", "build", "-o", ferrydBin, "github.com/ferrymq/ferry/cmd/ferryd")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build ferryd: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// unit is a parsed unit file: section, then key, then every value the key
// is given, in order ("" for an empty assignment).
type unit map[string]map[string][]string

// parseUnit reads a unit file's sections and assignments; comments and
// blank lines are skipped, and line continuations are refused (the unit
// does not use them, and the checks below would misread them).
func parseUnit(text string) (unit, error) {
	u := unit{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case strings.HasSuffix(line, `\`):
			return nil, fmt.Errorf("line %d: line continuations are not supported here", n)
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("line %d: %q is not an assignment inside a section", n, line)
		}
		key = strings.TrimSpace(key)
		u[section][key] = append(u[section][key], strings.TrimSpace(value))
	}
	return u, sc.Err()
}

// last returns the value a key ends up with (the last assignment), or "".
func (u unit) last(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// readUnit parses the unit file, failing the test on error.
func readUnit(t *testing.T) unit {
	t.Helper()
	text, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	u, err := parseUnit(string(text))
	if err != nil {
		t.Fatalf("%s: %v", unitPath, err)
	}
	return u
}

// systemdAnalyze returns the path of systemd-analyze, failing the test
// with how to install it when it is missing.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze not found (%v): install the systemd package (apt-get install -y systemd)", err)
	}
	return path
}

// installedCopy writes the unit to a temporary directory as ferryd.service
// with ExecStart running the ferryd built for the test instead of
// /usr/local/bin/ferryd, and returns its path.
func installedCopy(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "ExecStart="+installedFerryd+" ") {
		t.Fatalf("%s: ExecStart does not run %s", unitPath, installedFerryd)
	}
	out := filepath.Join(t.TempDir(), "ferryd.service")
	rewritten := strings.ReplaceAll(string(text), "ExecStart="+installedFerryd+" ", "ExecStart="+ferrydBin+" ")
	if err := os.WriteFile(out, []byte(rewritten), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUnit_SystemdAnalyzeVerify runs `systemd-analyze verify` on the unit
// and fails on any complaint: verify exits 0 on unknown keys and values it
// ignores, printing a warning, so its output must be empty too.
func TestUnit_SystemdAnalyzeVerify(t *testing.T) {
	sa := systemdAnalyze(t)
	out, err := exec.Command(sa, "verify", "--man=no", installedCopy(t)).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unitPath, err, out)
	}
}

// maxExposure is the highest `systemd-analyze security` exposure the unit
// may score: 0 is fully locked down, 10 not at all, and below 2 is what
// systemd calls "OK". What is left open is what a TCP server needs: the
// network, its own user, the host's root directory.
const maxExposure = 1.9

// TestUnit_SecurityExposure scores the unit's sandbox with
// `systemd-analyze security --offline`, so a loosened setting shows.
func TestUnit_SecurityExposure(t *testing.T) {
	sa := systemdAnalyze(t)
	cmd := exec.Command(sa, "security", "--offline=yes", "--no-pager", installedCopy(t))
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "Overall exposure level") {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	i := strings.Index(string(out), "Overall exposure level for ferryd.service: ")
	if i < 0 {
		t.Fatalf("systemd-analyze security printed no exposure level:\n%s", out)
	}
	fields := strings.Fields(string(out)[i+len("Overall exposure level for ferryd.service: "):])
	score, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		t.Fatalf("exposure level %q: %v", fields[0], err)
	}
	t.Logf("systemd-analyze security: exposure %.1f %s", score, strings.Join(fields[1:2], ""))
	if score > maxExposure {
		t.Errorf("exposure %.1f above %.1f:\n%s", score, maxExposure, out)
	}
}

// TestUnit_Settings checks what the unit promises: how ferryd is started,
// reloaded and stopped, and the sandbox it runs in.
func TestUnit_Settings(t *testing.T) {
	u := readUnit(t)
	want := map[string]string{
		"Type":                     "simple", // ferryd sends no sd_notify READY=1
		"User":                     "ferry",
		"ExecStart":                installedFerryd + " -config " + installedConfig,
		"ExecReload":               "/bin/kill -HUP $MAINPID",
		"KillSignal":               "SIGTERM",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": "2",
		"NoNewPrivileges":          "yes",
		"ProtectSystem":            "strict",
		"ProtectHome":              "yes",
		"PrivateTmp":               "yes",
		"PrivateDevices":           "yes",
		"ProtectKernelTunables":    "yes",
		"ProtectKernelModules":     "yes",
		"ProtectKernelLogs":        "yes",
		"ProtectControlGroups":     "yes",
		"MemoryDenyWriteExecute":   "yes",
		"LockPersonality":          "yes",
		"CapabilityBoundingSet":    "",
		"SystemCallArchitectures":  "native",
		"TimerSlackNSec":           "1ms", // ferryd's default -timer-slack: no re-execution at start
	}
	for key, v := range want {
		if got, ok := u["Service"][key]; !ok || u.last("Service", key) != v {
			t.Errorf("[Service] %s = %q, want %q", key, got, v)
		}
	}
	if !slices.Contains(u["Service"]["SystemCallFilter"], "@system-service") {
		t.Errorf("SystemCallFilter %q lacks @system-service", u["Service"]["SystemCallFilter"])
	}
	families := strings.Fields(u.last("Service", "RestrictAddressFamilies"))
	if !slices.Contains(families, "AF_INET") || !slices.Contains(families, "AF_INET6") {
		t.Errorf("RestrictAddressFamilies %q must allow AF_INET and AF_INET6", families)
	}
	if stop, err := time.ParseDuration(u.last("Service", "TimeoutStopSec") + "s"); err != nil || stop < 30*time.Second {
		t.Errorf("TimeoutStopSec %q: want 30 or more seconds (leadership hand-off, then closing every replica)", u.last("Service", "TimeoutStopSec"))
	}
	if n, err := strconv.Atoi(u.last("Service", "LimitNOFILE")); err != nil || n < 65536 {
		t.Errorf("LimitNOFILE %q: want 65536 or more", u.last("Service", "LimitNOFILE"))
	}
	dataDir := sampleSetting(t, "data-dir")
	state := "/var/lib/" + u.last("Service", "StateDirectory")
	if !within(dataDir, state) || !slices.ContainsFunc(strings.Fields(u.last("Service", "ReadWritePaths")), func(p string) bool {
		return within(dataDir, p)
	}) {
		t.Errorf("data-dir %q of %s must lie in the StateDirectory (%s) and a ReadWritePaths entry", dataDir, configPath, state)
	}
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// sampleSetting returns the quoted string value of a top-level key of
// the sample config.
func sampleSetting(t *testing.T, key string) string {
	t.Helper()
	text, err := os.ReadFile(configPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(text), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != key {
			continue
		}
		v = strings.TrimSpace(v)
		if i := strings.Index(v, "#"); i >= 0 {
			v = strings.TrimSpace(v[:i])
		}
		if s, err := strconv.Unquote(v); err == nil {
			return s
		}
	}
	t.Fatalf("%s: no string setting %s", configPath, key)
	return ""
}

func TestParseUnit(t *testing.T) {
	u, err := parseUnit("# c\n[Unit]\nDescription = x\n\n[Service]\n; c\nA=1\nA=\nB=a=b\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := u["Service"]["A"]; !slices.Equal(got, []string{"1", ""}) || u.last("Service", "B") != "a=b" || u.last("Unit", "Description") != "x" {
		t.Fatalf("parseUnit = %v", u)
	}
	for _, bad := range []string{"A=1\n", "[Service]\nnot an assignment\n", "[Service]\nA=1 \\\n  2\n"} {
		if _, err := parseUnit(bad); err == nil {
			t.Errorf("parseUnit(%q): want an error", bad)
		}
	}
	for path, want := range map[string]bool{"/var/lib/ferry": true, "/var/lib/ferry/x": true, "/var/lib/ferryx": false, "/var": false} {
		if within(path, "/var/lib/ferry") != want {
			t.Errorf("within(%q, /var/lib/ferry) = %v, want %v", path, !want, want)
		}
	}
}
