package helm_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// build compiles a command of the repository into dir and returns its
// path.
func build(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	run(t, ".", nil, "go", "build", "-o", out, "../../"+pkg)
	return out
}

// ferrydFlag is one flag of `ferryd -h`: its type (the flag package's
// name for it; "" for a boolean) and its environment twin.
type ferrydFlag struct {
	typ, env string
}

// ferrydFlags reads the flags ferryd accepts from its -h output.
func ferrydFlags(t *testing.T, ferryd string) map[string]ferrydFlag {
	t.Helper()
	cmd := exec.Command(ferryd, "-h")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("ferryd -h: %v\n%s", err, out.String())
	}
	flagLine := regexp.MustCompile(`^  -([a-z0-9-]+)(?: (.+))?$`)
	envMark := regexp.MustCompile(`\[(FERRY_[A-Z0-9_]+)\]`)
	flags := map[string]ferrydFlag{}
	last := ""
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		if m := flagLine.FindStringSubmatch(line); m != nil {
			last = m[1]
			flags[last] = ferrydFlag{typ: m[2]}
			continue
		}
		if m := envMark.FindStringSubmatch(line); m != nil && last != "" {
			f := flags[last]
			f.env = m[1]
			flags[last] = f
		}
	}
	if len(flags) < 20 || flags["id"].env != "FERRY_ID" {
		t.Fatalf("could not read ferryd's flags from -h (%d read):\n%s", len(flags), out.String())
	}
	return flags
}

// checkValue reports whether v is a valid value for a flag of type typ.
func checkValue(typ, v string) error {
	var err error
	switch typ {
	case "":
		_, err = strconv.ParseBool(v)
	case "int":
		_, err = strconv.ParseInt(v, 0, 64)
	case "uint":
		_, err = strconv.ParseUint(v, 0, 64)
	case "float":
		_, err = strconv.ParseFloat(v, 64)
	case "duration":
		_, err = time.ParseDuration(v)
	}
	return err
}

// podEnv resolves a container's environment as the kubelet would for a
// pod named podName with IP podIP: downward API fields, and $(NAME)
// references to variables defined before.
func podEnv(t *testing.T, c map[string]any, podName, podIP string) [][2]string {
	t.Helper()
	var out [][2]string
	vals := map[string]string{}
	for _, e := range list(c, "env") {
		name := str(e, "name")
		v, literal := get(e, "value").(string)
		if !literal {
			switch path := str(e, "valueFrom", "fieldRef", "fieldPath"); path {
			case "metadata.name":
				v = podName
			case "status.podIP":
				v = podIP
			default:
				t.Fatalf("env %s: valueFrom %v is not stood in for here", name, get(e, "valueFrom"))
			}
		}
		v = expandRefs(v, vals)
		vals[name] = v
		out = append(out, [2]string{name, v})
	}
	return out
}

// expandRefs replaces $(NAME) with vals[NAME] when defined, keeps it
// otherwise, and turns $$ into $, as Kubernetes does in env values,
// commands and arguments.
func expandRefs(s string, vals map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, "$$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(rest, "$("):
			end := strings.IndexByte(rest, ')')
			if end < 0 {
				b.WriteString(rest)
				return b.String()
			}
			if v, ok := vals[rest[2:end]]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(rest[:end+1])
			}
			i += end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// TestChart_FerrydAcceptsWhatItIsGiven checks every FERRY_* variable and
// every argument the chart gives the ferryd container against the flags of
// the ferryd built from this checkout: a known flag, and a value of its
// type once the kubelet has expanded the references.
func TestChart_FerrydAcceptsWhatItIsGiven(t *testing.T) {
	flags := ferrydFlags(t, build(t, t.TempDir(), "cmd/ferryd"))
	byEnv := map[string]string{}
	for name, f := range flags {
		byEnv[f.env] = name
	}
	for _, c := range valueCases {
		t.Run(c.name, func(t *testing.T) {
			objs := renderObjects(t, c.args...)
			ferryd := container(t, get(only(t, objs, "StatefulSet"), "spec", "template", "spec"), "containers", "ferryd")
			if cmd := list(ferryd, "command"); len(cmd) != 1 || cmd[0] != "ferryd" {
				t.Errorf("the container runs %v, want ferryd", cmd)
			}
			given := map[string]bool{}
			for _, kv := range podEnv(t, ferryd, "ferry-0", "10.1.2.3") {
				if !strings.HasPrefix(kv[0], "FERRY_") {
					continue
				}
				name, ok := byEnv[kv[0]]
				if !ok {
					t.Errorf("env %s: ferryd has no such variable", kv[0])
					continue
				}
				given[name] = true
				if err := checkValue(flags[name].typ, kv[1]); err != nil {
					t.Errorf("env %s=%q: not a valid -%s (%s): %v", kv[0], kv[1], name, flags[name].typ, err)
				}
			}
			for _, a := range checkArgs(t, flags, list(ferryd, "args")) {
				given[a] = true
			}
			for _, must := range []string{"id", "ip", "data-dir", "tls-cert", "tls-key", "tls-ca", "gossip-keyring", "tokens", "join", "bootstrap-expect"} {
				if !given[must] {
					t.Errorf("ferryd is not given -%s", must)
				}
			}
			if given["insecure"] || given["fast-gossip"] {
				t.Errorf("ferryd is given -insecure or -fast-gossip")
			}
		})
	}
}

// checkArgs checks command line arguments against ferryd's flags, as the
// flag package parses them, and returns the flags set.
func checkArgs(t *testing.T, flags map[string]ferrydFlag, args []any) []string {
	t.Helper()
	var set []string
	for i := 0; i < len(args); i++ {
		a := fmt.Sprint(args[i])
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name == "" {
			t.Errorf("argument %q: ferryd takes flags only", a)
			continue
		}
		f, ok := flags[name]
		if !ok {
			t.Errorf("argument %q: ferryd has no flag -%s", a, name)
			continue
		}
		set = append(set, name)
		if f.typ == "" && !hasValue {
			continue
		}
		if !hasValue {
			if i+1 == len(args) {
				t.Errorf("argument %q: no value follows", a)
				continue
			}
			i++
			value = fmt.Sprint(args[i])
		}
		if err := checkValue(f.typ, value); err != nil {
			t.Errorf("argument -%s %q: not a valid %s: %v", name, value, f.typ, err)
		}
	}
	return set
}
