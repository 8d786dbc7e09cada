package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// groupCommands returns every command of the tree under cmd that has
// subcommands, by their path below the root.
func groupCommands(cmd *cobra.Command, path []string, out map[string][]string) {
	if cmd.HasSubCommands() {
		out[cmd.CommandPath()] = path
	}
	for _, sub := range cmd.Commands() {
		groupCommands(sub, append(append([]string(nil), path...), sub.Name()), out)
	}
}

// Every group command of the CLI, found by walking the command tree (so a
// group added later is covered too), answers an unknown subcommand with
// an error naming it, without running anything; the binary exits non-zero
// for the cases the README's "a failure always exits non-zero" promises.
func TestCLI_EveryGroupRefusesAnUnknownSubcommand(t *testing.T) {
	groups := make(map[string][]string)
	groupCommands(newRoot(), nil, groups)
	for _, want := range []string{"ferry", "ferry queue", "ferry dlq", "ferry cluster", "ferry node", "ferry bench", "ferry completion"} {
		if _, ok := groups[want]; !ok {
			t.Errorf("the walk did not find the group %q (found %v)", want, groups)
		}
	}
	for path, args := range groups {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(append([]string(nil), args...), "frobnicate", "n2"))
		err := root.Execute()
		if !errors.Is(err, errUnknownCommand) || !strings.Contains(err.Error(), `"frobnicate"`) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s frobnicate: err %v, want %v naming frobnicate and %q", path, err, errUnknownCommand, path)
		}
		if out.Len() != 0 {
			t.Errorf("%s frobnicate printed %q, want only the error", path, out.String())
		}
		// With no subcommand the group prints its help and succeeds.
		root = newRoot()
		out.Reset()
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil || !strings.Contains(out.String(), "Available Commands") {
			t.Errorf("%s alone: err %v, output %q, want its help", path, err, out.String())
		}
	}
	for _, c := range []struct {
		args    []string
		unknown string
	}{{[]string{"node", "evacuate", "n2"}, "evacuate"}, {[]string{"queue", "nosuch"}, "nosuch"}, {[]string{"dlq", "frob"}, "frob"}, {[]string{"nosuch"}, "nosuch"}} {
		r := ferry(t, []string{"127.0.0.1:1"}, c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, `unknown command "`+c.unknown+`"`) || r.stdout != "" {
			t.Errorf("ferry %v: exit %d, stdout %q, stderr %q, want a non-zero exit naming %s", c.args, r.code, r.stdout, r.stderr, c.unknown)
		}
	}
	if r := ferry(t, []string{"127.0.0.1:1"}, "bench", "pubb"); r.code == 0 || !strings.Contains(r.stderr, "did you mean pub?") {
		t.Errorf("ferry bench pubb: exit %d, stderr %q, want a suggestion of pub", r.code, r.stderr)
	}
}
