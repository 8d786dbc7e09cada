package deploytest

import (
	"fmt"
	"os"
	"testing"
)

// testDir holds what the tests build (binaries, the image's root file
// system); TestMain removes it.
var testDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ferry-deploytest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
