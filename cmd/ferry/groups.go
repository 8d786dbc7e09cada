package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// requireKnownSubcommands makes every group command of the tree under cmd
// (cmd included: a command with subcommands and no action of its own)
// refuse an unknown subcommand with errUnknownCommand, which exits
// non-zero. Without it cobra answers `ferry queue nosuch` with the group's
// help and exit 0, so a script calling a command the CLI does not have
// would believe it worked. A group called with no arguments still prints
// its help. Call it once the tree is complete (the default completion
// command included), so that every group is covered.
func requireKnownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		requireKnownSubcommands(sub)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		return unknownSubcommand(cmd, args[0])
	}
}

// unknownSubcommand is the error for name under the group cmd, with the
// likely meant subcommand when one is close enough.
func unknownSubcommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("%q for %q", truncateArg(name, 64), cmd.CommandPath())
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if best := closest(name, names); best != "" {
		msg += " (did you mean " + best + "?)"
	}
	return fmt.Errorf("%w %s; run '%s --help' for its commands", errUnknownCommand, msg, cmd.CommandPath())
}

// truncateArg cuts an argument echoed in an error to n bytes.
func truncateArg(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
