// Package helm_test checks the Helm chart in ferry/: it lints it, validates
// what it renders against the Kubernetes schemas kept in testdata/schemas
// (kubeconform -strict, offline), checks that the rendered objects agree
// with each other and with ferryd (flags, environment, ports, probe paths),
// and runs the rendered pods as local processes (pods_test.go).
//
// helm and kubeconform must be installed (`make tools`); a test fails,
// saying how to install them, when either is missing.
package helm_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Tool versions the checks were written against; `make tools` installs
// them.
const (
	helmModule        = "helm.sh/helm/v3/cmd/helm"
	helmVersion       = "v3.21.4"
	kubeconformModule = "github.com/yannh/kubeconform/cmd/kubeconform"
	kubeconformVer    = "v0.8.0"
	// kubernetesVersion names the schema directory in testdata/schemas.
	kubernetesVersion = "1.36.3"
)

// The release the checks render.
const (
	chartDir  = "ferry"
	release   = "ferry"
	namespace = "ferry-test"
)

// valueCases are the values the chart is rendered with: the defaults and
// files turning on the optional parts.
// kinds lists what each must render.
var valueCases = []struct {
	name  string
	args  []string
	kinds []string
}{
	{"defaults", nil, []string{"StatefulSet", "Service", "PodDisruptionBudget", "Secret", "ConfigMap", "ServiceAccount"}},
	{"full", []string{"-f", "testdata/values-full.yaml"},
		[]string{"StatefulSet", "Service", "PodDisruptionBudget", "Secret", "ConfigMap", "ServiceAccount", "ServiceMonitor"}},
	{"cert-manager", []string{"-f", "testdata/values-certmanager.yaml"},
		[]string{"StatefulSet", "Service", "PodDisruptionBudget", "ConfigMap", "ServiceMonitor", "Certificate", "Issuer"}},
}

// tool returns the path of an installed tool: on the PATH or in
// $(go env GOPATH)/bin, where go install puts it.
func tool(t *testing.T, name, module, version string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p
			}
		}
	}
	t.Fatalf("%s is not installed (not on PATH nor in $(go env GOPATH)/bin): install it with "+
		"`go install %s@%s`, or run `make tools`", name, module, version)
	return ""
}

func helmTool(t *testing.T) string { return tool(t, "helm", helmModule, helmVersion) }

// run runs a command in dir and returns its standard output; it fails the
// test with both outputs when the command fails.
func run(t *testing.T, dir string, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err,
			tail(stdout.String()), tail(stderr.String()))
	}
	return stdout.Bytes()
}

// tail keeps the end of a long output for a failure message.
func tail(s string) string {
	const keep = 6000
	if len(s) > keep {
		return "..." + s[len(s)-keep:]
	}
	return s
}

// render runs helm template on the chart in chart with args added.
func render(t *testing.T, chart string, args ...string) []byte {
	t.Helper()
	base := []string{"template", release, chart, "--namespace", namespace, "--kube-version", kubernetesVersion}
	return run(t, ".", nil, helmTool(t), append(base, args...)...)
}

func TestChart_LintsClean(t *testing.T) {
	helm := helmTool(t)
	for _, c := range valueCases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chartDir, "--namespace", namespace, "--kube-version", kubernetesVersion}, c.args...)
			out := run(t, ".", nil, helm, args...)
			if !bytes.Contains(out, []byte("1 chart(s) linted, 0 chart(s) failed")) {
				t.Fatalf("helm lint did not pass:\n%s", out)
			}
		})
	}
}

// kubeconformSummary is the summary of kubeconform -output json.
type kubeconformSummary struct {
	Resources []struct {
		Filename, Kind, Name, Version, Status, Msg string
	} `json:"resources"`
	Summary struct {
		Valid, Invalid, Errors, Skipped int
	} `json:"summary"`
}

// TestChart_RendersValidKubernetesObjects validates every rendered object
// against the schemas of testdata/schemas, strictly: unknown fields are
// errors, and so is a kind without a schema.
func TestChart_RendersValidKubernetesObjects(t *testing.T) {
	kc := tool(t, "kubeconform", kubeconformModule, kubeconformVer)
	for _, c := range valueCases {
		t.Run(c.name, func(t *testing.T) {
			manifest := render(t, chartDir, c.args...)
			out := run(t, ".", manifest, kc, "-strict", "-summary", "-output", "json", "-verbose",
				"-kubernetes-version", kubernetesVersion, "-schema-location", "testdata/schemas", "-")
			var s kubeconformSummary
			if err := json.Unmarshal(out, &s); err != nil {
				t.Fatalf("kubeconform output: %v\n%s", err, out)
			}
			if s.Summary.Invalid+s.Summary.Errors+s.Summary.Skipped > 0 || s.Summary.Valid == 0 {
				t.Fatalf("kubeconform: %+v\n%s", s.Summary, out)
			}
			kinds := map[string]bool{}
			for _, r := range s.Resources {
				kinds[r.Kind] = true
			}
			for _, want := range c.kinds {
				if !kinds[want] {
					t.Errorf("no %s validated (validated: %v)", want, kinds)
				}
			}
			t.Logf("%d objects valid", s.Summary.Valid)
		})
	}
}

// object is one rendered Kubernetes object, as decoded JSON.
type object = map[string]any

// renderObjects renders the chart with args and returns its objects.
func renderObjects(t *testing.T, args ...string) []object {
	t.Helper()
	objs, _ := renderDump(t, args...)
	return objs
}

// renderDump renders the chart with args and returns its objects and the
// values it was rendered with. helm prints what the templates wrote, as
// YAML; to read it without a YAML library, the chart is copied with one
// more template that renders every template of the chart through include
// and fromYaml and writes the objects, and the values, as one JSON List.
func renderDump(t *testing.T, args ...string) ([]object, map[string]any) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), chartDir)
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	tpls, err := filepath.Glob(filepath.Join(chartDir, "templates", "*.yaml"))
	if err != nil || len(tpls) == 0 {
		t.Fatalf("no templates in %s: %v", chartDir, err)
	}
	var names []string
	for _, p := range tpls {
		names = append(names, fmt.Sprintf("%q", chartDir+"/templates/"+filepath.Base(p)))
	}
	dump := `{{- $items := list }}
{{- range $name := list ` + strings.Join(names, " ") + ` }}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" (include $name $) -1 }}
{{- $obj := fromYaml $doc }}
{{- if $obj }}{{ $items = append $items (set $obj "x-template" $name) }}{{ end }}
{{- end }}
{{- end }}
{{ dict "apiVersion" "v1" "kind" "List" "items" $items "values" .Values | toJson }}
`
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-json-dump.yaml"), []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	out := render(t, dir, append(args, "--show-only", "templates/zz-json-dump.yaml")...)
	start := bytes.IndexByte(out, '{')
	if start < 0 {
		t.Fatalf("no JSON in the dump:\n%s", out)
	}
	var list struct {
		Items  []object
		Values map[string]any
	}
	if err := json.Unmarshal(out[start:], &list); err != nil {
		t.Fatalf("decoding the dump: %v\n%s", err, tail(string(out)))
	}
	for _, o := range list.Items {
		if e, ok := o["Error"]; ok {
			t.Fatalf("a template of %s does not parse as YAML: %v", o["x-template"], e)
		}
		delete(o, "x-template")
	}
	if len(list.Items) == 0 {
		t.Fatal("the chart rendered no object")
	}
	return list.Items, list.Values
}

// TestChart_ReadmeDocumentsEveryValue checks that every value of
// values.yaml, or a value holding it, has a row in the README's table.
func TestChart_ReadmeDocumentsEveryValue(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ := strings.Cut(rest, "`")
			documented[name] = true
		}
	}
	_, values := renderDump(t)
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		for p := prefix; ; {
			if documented[p] {
				return
			}
			i := strings.LastIndexByte(p, '.')
			if i < 0 {
				break
			}
			p = p[:i]
		}
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 {
			t.Errorf("value %s is not in the README's table", prefix)
			return
		}
		for k, e := range m {
			walk(strings.TrimPrefix(prefix+"."+k, "."), e)
		}
	}
	walk("", values)
}
