package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// confirmer asks before a destructive command runs.
type confirmer struct {
	yes bool
}

func (c *confirmer) bind(fs *pflag.FlagSet) {
	fs.BoolVarP(&c.yes, "yes", "y", false, "do not ask for confirmation (needed when standard input is not a terminal)")
}

// confirm returns nil when the user agreed to what: --yes was given, or
// standard input is a terminal and the answer was y or yes. Without a
// terminal and without --yes it refuses, so that a script never destroys
// data by accident.
func (c *confirmer) confirm(what string) error {
	if c.yes {
		return nil
	}
	if !isTerminal(os.Stdin) {
		return fmt.Errorf("refusing to %s without confirmation: standard input is not a terminal; pass --yes to go ahead", what)
	}
	return ask(os.Stdin, os.Stderr, what)
}

// ask prompts on out and reads one answer from in.
func ask(in io.Reader, out io.Writer, what string) error {
	fmt.Fprintf(out, "%s? [y/N] ", capitalize(what))
	line, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("not confirmed: did not %s", what)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
