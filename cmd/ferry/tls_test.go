package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ferrymq/ferry/ferrytest"
	"github.com/ferrymq/ferry/internal/testwait"
)

// runFerry runs the CLI with args and extra environment, and returns its
// output and exit code.
func runFerry(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ferryBin, args...)
	cmd.Dir = t.TempDir() // no data/pki here
	cmd.Env = append(append(os.Environ(), "FERRY_SERVERS=", "FERRY_CA=", "FERRY_INSECURE=", "FERRY_TOKEN=", "FERRY_TOKEN_FILE="), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

func TestCLI_TLSClusterNeedsItsCA(t *testing.T) {
	fc := ferrytest.Start(t, ferrytest.Options{TLS: true})
	ca := fc.CAFile()
	base := []string{"-s", fc.Addrs()[0], "--timeout", "10s"}
	testwait.UntilNil(t, 20*time.Second, "queue created with --ca", func() error {
		if out, code := runFerry(t, nil, append(base, "--ca", ca, "queue", "create", "tls-orders")...); code != 0 {
			return fmt.Errorf("exit %d: %s", code, out)
		}
		return nil
	})
	if out, code := runFerry(t, []string{"FERRY_CA=" + ca}, append(base, "queue", "ls")...); code != 0 || !strings.Contains(out, "tls-orders") {
		t.Fatalf("queue ls with FERRY_CA: exit %d: %s", code, out)
	}
	out, code := runFerry(t, nil, append(base, "--timeout", "3s", "queue", "ls")...)
	if code == 0 || !strings.Contains(out, "--ca") {
		t.Fatalf("without the CA: exit %d: %s, want a failure pointing at --ca", code, out)
	}
	out, code = runFerry(t, nil, append(base, "--timeout", "3s", "--insecure", "queue", "ls")...)
	if code == 0 || !strings.Contains(out, "drop --insecure") {
		t.Fatalf("--insecure against a TLS cluster: exit %d: %s, want a failure saying to drop --insecure", code, out)
	}
}
