package observability

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Where the checked files are, from this package's directory.
var (
	dashboardPath = filepath.Join("..", "grafana", "ferry.json")
	dashboardDoc  = filepath.Join("..", "grafana", "README.md")
	alertsPath    = filepath.Join("..", "..", "docs", "ferry-alerts.yml")
)

// query is one PromQL expression and where it was found.
type query struct {
	where string // "dashboard panel \"Queue depth\"", "alert FerryDeadLettersOld"
	expr  string
	// variable marks a Grafana variable query (label_values(...) and
	// the like), read with variableQueryNames.
	variable bool
}

// names returns the metric names the query selects.
func (q query) names() ([]string, error) {
	if q.variable {
		return variableQueryNames(q.expr)
	}
	return metricNames(q.expr)
}

// dashboardQueries returns every PromQL expression of a Grafana dashboard:
// each "expr" field anywhere in it (panel targets), and the queries of its
// query variables.
func dashboardQueries(doc []byte) ([]query, error) {
	var root map[string]any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	var out []query
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch x := v.(type) {
		case map[string]any:
			if title, ok := x["title"].(string); ok && x["type"] != nil {
				where = fmt.Sprintf("panel %q", title)
			}
			for k, e := range x {
				if s, ok := e.(string); ok && k == "expr" {
					out = append(out, query{where: "dashboard " + where, expr: s})
					continue
				}
				walk(e, where)
			}
		case []any:
			for _, e := range x {
				walk(e, where)
			}
		}
	}
	walk(root["panels"], "")
	for _, v := range templateVars(root) {
		if v["type"] != "query" {
			continue
		}
		q, _ := v["query"].(string)
		if m, ok := v["query"].(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		out = append(out, query{where: fmt.Sprintf("dashboard variable %q", v["name"]), expr: q, variable: true})
	}
	return out, nil
}

// templateVars returns the dashboard's template variables.
func templateVars(root map[string]any) []map[string]any {
	templating, _ := root["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	var out []map[string]any
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

var (
	ruleLine = regexp.MustCompile(`^\s*-\s+(alert|record):\s*(\S.*?)\s*$`)
	exprLine = regexp.MustCompile(`^(\s*)(-\s+)?expr:(.*)$`)
	blockHdr = regexp.MustCompile(`^[|>][-+0-9]*\s*(#.*)?$`)
)

// alertQueries returns the expr of every rule of a Prometheus rule file.
// It reads the subset of YAML rule files are written in: an expr value
// plain (continued on more indented lines), single- or double-quoted on
// one line, or a | or > block; anything else is an error, as is a rule
// without exactly one expr.
func alertQueries(text string) ([]query, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	var out []query
	rule, exprs := "", 0
	finish := func() error {
		if rule != "" && exprs != 1 {
			return fmt.Errorf("rule %s has %d expr fields, want 1", rule, exprs)
		}
		return nil
	}
	for i := 0; i < len(lines); i++ {
		if m := ruleLine.FindStringSubmatch(lines[i]); m != nil {
			if err := finish(); err != nil {
				return nil, err
			}
			rule, exprs = m[1]+" "+unquoteName(m[2]), 0
		}
		m := exprLine.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if rule == "" {
			return nil, fmt.Errorf("line %d: expr outside a rule", i+1)
		}
		indent := len(m[1]) + len(m[2])
		expr, next, err := yamlScalar(lines, i, indent, strings.TrimSpace(m[3]))
		if err != nil {
			return nil, fmt.Errorf("line %d (%s): %w", i+1, rule, err)
		}
		out = append(out, query{where: rule, expr: expr})
		exprs++
		i = next - 1
	}
	if err := finish(); err != nil {
		return nil, err
	}
	return out, nil
}

// yamlScalar reads the value that starts as first on line i, whose key
// sits at column indent; it returns the value and the index of the first
// line after it.
func yamlScalar(lines []string, i, indent int, first string) (string, int, error) {
	more := func(j int) bool { // line j continues the value
		l := lines[j]
		return strings.TrimSpace(l) == "" || len(l)-len(strings.TrimLeft(l, " ")) > indent
	}
	switch {
	case first == "":
		return "", 0, fmt.Errorf("empty expr (a value on the next lines is not supported)")
	case blockHdr.MatchString(first):
		var body []string
		j := i + 1
		for ; j < len(lines) && more(j); j++ {
			body = append(body, strings.TrimSpace(lines[j]))
		}
		v := strings.TrimSpace(strings.Join(body, "\n"))
		if v == "" {
			return "", 0, fmt.Errorf("empty block expr")
		}
		return v, j, nil
	case first[0] == '"':
		end := closingQuote(first)
		if end < 0 {
			return "", 0, fmt.Errorf("double-quoted expr must end on its line")
		}
		v, err := strconv.Unquote(first[:end+1])
		return v, i + 1, err
	case first[0] == '\'':
		end := strings.LastIndexByte(first, '\'')
		if end == 0 {
			return "", 0, fmt.Errorf("single-quoted expr must end on its line")
		}
		return strings.ReplaceAll(first[1:end], "''", "'"), i + 1, nil
	case strings.ContainsAny(first[:1], "[{&*!%@`"):
		return "", 0, fmt.Errorf("expr value %q: YAML form not supported here", first)
	}
	parts := []string{plainPart(first)}
	j := i + 1
	for ; j < len(lines) && strings.TrimSpace(lines[j]) != "" && more(j); j++ {
		parts = append(parts, plainPart(strings.TrimSpace(lines[j])))
	}
	return strings.Join(parts, " "), j, nil
}

// plainPart is a line of a plain scalar without its comment (" #...").
func plainPart(s string) string {
	if k := strings.Index(s, " #"); k >= 0 {
		s = s[:k]
	}
	return strings.TrimSpace(s)
}

// closingQuote returns the index of the quote that ends the
// double-quoted string at the start of s, or -1.
func closingQuote(s string) int {
	for k := 1; k < len(s); k++ {
		switch s[k] {
		case '\\':
			k++
		case '"':
			return k
		}
	}
	return -1
}

// unquoteName strips YAML quotes from a rule name.
func unquoteName(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

func TestAlertQueries_ReadsTheYAMLForms(t *testing.T) {
	text := `groups:
  - name: g
    rules:
      - alert: Plain
        expr: sum(a) > 0 # a comment
        for: 5m
      - alert: "Folded"
        expr: sum by (queue) (b)
          > on (queue) c
        labels: {severity: x}
      - record: job:d:rate5m
        expr: |
          rate(d[5m])
          # why
      - alert: Quoted
        expr: "e{q=\"x\"} > 1"
      - alert: Single
        expr: 'f{q=''y''} > 1'
`
	got, err := alertQueries(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []query{
		{where: "alert Plain", expr: "sum(a) > 0"},
		{where: "alert Folded", expr: "sum by (queue) (b) > on (queue) c"},
		{where: "record job:d:rate5m", expr: "rate(d[5m])\n# why"},
		{where: "alert Quoted", expr: `e{q="x"} > 1`},
		{where: "alert Single", expr: `f{q='y'} > 1`},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("alertQueries:\n got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{
		"- alert: A\n  for: 5m\n",
		"- alert: A\n  expr: a\n  expr: b\n",
		"- alert: A\n  expr:\n    a > 1\n",
		"- alert: A\n  expr: \"a > 1\n",
		"- alert: A\n  expr: [a]\n",
	} {
		if q, err := alertQueries(bad); err == nil {
			t.Errorf("alertQueries(%q) = %+v, want an error", bad, q)
		}
	}
}

func TestDashboardQueries_FindsTargetsAndVariables(t *testing.T) {
	doc := `{"panels": [
	  {"type": "row", "title": "R", "panels": [
	    {"type": "timeseries", "title": "In row", "targets": [{"refId": "A", "expr": "a"}]}]},
	  {"type": "stat", "title": "Top", "targets": [{"refId": "A", "expr": "b"}, {"refId": "B", "expr": "c"}]}],
	 "templating": {"list": [
	   {"type": "datasource", "name": "datasource", "query": "prometheus"},
	   {"type": "query", "name": "v1", "query": "label_values(d, instance)"},
	   {"type": "query", "name": "v2", "query": {"query": "label_values(e, queue)", "refId": "x"}}]}}`
	qs, err := dashboardQueries([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, q := range qs {
		names, err := q.names()
		if err != nil {
			t.Fatal(err)
		}
		got[strings.Join(names, ",")] = q.where
	}
	want := map[string]string{
		"a": `dashboard panel "In row"`, "b": `dashboard panel "Top"`, "c": `dashboard panel "Top"`,
		"d": `dashboard variable "v1"`, "e": `dashboard variable "v2"`,
	}
	if len(got) != len(want) {
		t.Fatalf("dashboardQueries found %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("metric %s: found at %q, want %q", k, got[k], v)
		}
	}
}

// readFile returns a file's text, failing the test when it is missing.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// usedMetrics returns every metric name the dashboard and the alert rules
// select, each with the places that use it.
func usedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	qs, err := dashboardQueries([]byte(readFile(t, dashboardPath)))
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := alertQueries(readFile(t, alertsPath))
	if err != nil {
		t.Fatalf("%s: %v", alertsPath, err)
	}
	used := map[string][]string{}
	for _, q := range append(qs, alerts...) {
		names, err := q.names()
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", q.where, q.expr)
		}
		for _, n := range names {
			if !slices.Contains(used[n], q.where) {
				used[n] = append(used[n], q.where)
			}
		}
	}
	return used
}
