// Package pythonclient runs the tests of the Python client in this
// directory (package ferryclient) under go test: the protocol vectors, and
// a real three-node ferryd cluster over TLS built from this checkout.
package pythonclient

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// python is Debian's interpreter, which python3-msgpack installs into.
const python = "/usr/bin/python3"

// pythonTimeout bounds the whole Python run (cluster start included).
const pythonTimeout = 4 * time.Minute

// TestPythonClient builds ferryd, then runs `python3 -m unittest` over
// tests/ and fails with the Python output when any test fails.
func TestPythonClient(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s not found (%v): install it with apt-get install -y python3 python3-msgpack", python, err)
	}
	if out, err := exec.Command(python, "-c", "import msgpack").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import msgpack (%v): install it with apt-get install -y python3-msgpack\n%s", python, err, out)
	}
	binDir := t.TempDir()
	build := exec.Command("go", "build", "-o", binDir+"/", "github.com/ferrymq/ferry/cmd/ferryd", "github.com/ferrymq/ferry/cmd/ferry")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), pythonTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
	cmd.Env = append(os.Environ(), "FERRY_BIN_DIR="+binDir, "TMPDIR="+t.TempDir(), "PYTHONDONTWRITEBYTECODE=1")
	// Python and the ferryd processes it starts share one process group,
	// killed as a whole on timeout and after the run, so no node outlives it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("the Python tests did not finish within %v:\n%s", pythonTimeout, out.String())
	}
	if err != nil {
		t.Fatalf("the Python tests failed (%v):\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	t.Logf("python tests passed in %v: %s", time.Since(start).Round(time.Millisecond), lines[len(lines)-1])
	for _, l := range lines {
		if strings.HasPrefix(l, "Ran ") {
			t.Log(l)
		}
	}
}
