package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/internal/jsonview"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagAliases are flag names kept from before the flags were derived from
// the settings table: the old name still works.
var flagAliases = map[string]string{"visibility": "visibility-timeout"}

// configFlags binds one flag per queue setting, derived from fsm's
// settings table, plus --partitions and --replicas for a create. Only the
// flags the user gave are sent: a create takes the cluster's defaults for
// the others and an update leaves them as they are. A flag given as 0
// sends 0, which means "no limit" or "off" where the help says so.
type configFlags struct {
	partitions, replicas int
	values               []*settingFlag
}

// settingFlag is the flag of one setting: a duration, an integer, or a
// switch (given alone it means on; --name=false turns it off).
type settingFlag struct {
	s fsm.Setting
	v int64
}

// String writes the value as the setting reads; 0 as "0", which the help
// leaves out as no default.
func (f *settingFlag) String() string {
	if f.s.Kind == fsm.KindSwitch {
		return strconv.FormatBool(f.v != 0)
	}
	if f.v == 0 {
		return "0"
	}
	return f.s.Format(f.v)
}

// Set parses a duration ("30s"), an integer, or a switch (true, false, 1
// or 0), by the setting's kind.
func (f *settingFlag) Set(text string) error {
	if f.s.Kind == fsm.KindSwitch {
		on, err := strconv.ParseBool(text)
		f.v = 0
		if on {
			f.v = 1
		}
		return err
	}
	if f.s.Kind == fsm.KindDuration {
		d, err := time.ParseDuration(text)
		f.v = int64(d)
		return err
	}
	n, err := strconv.ParseInt(text, 10, 64)
	f.v = n
	return err
}

// Type names the value's kind in the help.
func (f *settingFlag) Type() string {
	if f.s.Kind == fsm.KindDuration {
		return "duration"
	}
	if f.s.Kind == fsm.KindSwitch {
		return "bool"
	}
	return "int"
}

// flagName is the flag of a setting: its name with dashes.
func flagName(s fsm.Setting) string { return strings.ReplaceAll(s.Name, "_", "-") }

// flagHelp is a setting's help with its range and meaning of zero.
func flagHelp(s fsm.Setting) string {
	h := s.Help + "; " + s.Range()
	if s.Zero != "" {
		h += "; 0 = " + s.Zero
	}
	return h
}

// bind declares the flags. A create shows this version's defaults (`ferry
// queue settings` asks the cluster for its own); an update shows none,
// since a flag left out keeps the current value.
func (f *configFlags) bind(fs *pflag.FlagSet, update bool) {
	if !update {
		fs.IntVar(&f.partitions, "partitions", 1, "number of partitions, 1..64; fixed at creation")
		fs.IntVar(&f.replicas, "replicas", 0,
			"replicas of each partition, 1..5; fixed at creation (default 3, or the number of nodes when fewer)")
	}
	for _, s := range fsm.Settings() {
		v := &settingFlag{s: s}
		if !update {
			v.v = s.Default
		}
		fs.Var(v, flagName(s), flagHelp(s))
		if s.Kind == fsm.KindSwitch {
			fs.Lookup(flagName(s)).NoOptDefVal = "true" // --fair-groups alone turns it on
		}
		f.values = append(f.values, v)
	}
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if n, ok := flagAliases[name]; ok {
			name = n
		}
		return pflag.NormalizedName(name)
	})
}

// settings returns the settings of the flags that were given.
func (f *configFlags) settings(fs *pflag.FlagSet) ([]client.QueueSetting, error) {
	var out []client.QueueSetting
	if fs.Changed("partitions") {
		out = append(out, client.Partitions(f.partitions))
	}
	if fs.Changed("replicas") {
		out = append(out, client.Replicas(f.replicas))
	}
	for _, v := range f.values {
		if !fs.Changed(flagName(v.s)) {
			continue
		}
		s, err := client.Setting(v.s.Name, v.v)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// queueSettingsCmd shows the queue settings the cluster applies.
func queueSettingsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "settings", Short: "Show the queue settings the cluster knows: defaults, ranges, meaning",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, done, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			infos, err := c.QueueSettings(ctx)
			if err != nil || g.json {
				return firstErr(err, func() error { return printJSON(jsonview.SettingsOf(infos)) })
			}
			rows := make([][]string, 0, len(infos))
			for _, s := range infos {
				format := func(v int64) string { return fmt.Sprint(jsonview.SettingValue(s.Kind, v)) }
				rng := format(s.Min) + ".." + format(s.Max)
				if s.Max == 0 {
					rng = format(s.Min) + ".."
				}
				def := format(s.Default)
				if s.Fixed && s.Default == 0 {
					def = s.Zero
				}
				rows = append(rows, []string{s.Name, def, rng, s.Zero, s.Help})
			}
			table([]string{"SETTING", "DEFAULT", "RANGE", "0 MEANS", "WHAT IT DOES"}, rows)
			return nil
		},
	}
}
