package client_test

import (
	"go/build"
	"strings"
	"testing"
)

// The library imports package wire and the standard library only, so a
// program using it pulls in nothing of the server. Its tests may import
// more (the fake server runs the server's state machines).
func TestClient_ImportsOnlyWireAndTheStandardLibrary(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatalf("reading the package: %v", err)
	}
	if len(pkg.Imports) == 0 {
		t.Fatal("no imports found")
	}
	for _, imp := range pkg.Imports {
		standard := !strings.Contains(strings.Split(imp, "/")[0], ".")
		if !standard && imp != "github.com/ferrymq/ferry/wire" {
			t.Errorf("package client imports %s; it may import only wire and the standard library", imp)
		}
	}
}
