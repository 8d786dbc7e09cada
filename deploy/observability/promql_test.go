package observability

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// promKeywords are PromQL words that are never metric names: binary
// operators, modifiers and the number literals Inf and NaN (compared in
// lower case: PromQL keywords are case-insensitive).
var promKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true,
}

// labelListKeywords are followed by a parenthesized list of label names,
// which are not metric names either.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// promScanner walks one PromQL expression and collects the metric names
// it selects: bare names, and names given as {__name__="..."}. Strings,
// label matchers, ranges, numbers, durations, comments and Grafana
// variables ($x, ${x}, [[x]]) are skipped; an identifier followed by "("
// is a function or aggregation.
type promScanner struct {
	src   string
	pos   int
	names map[string]bool
}

// metricNames returns the metric names expr selects, sorted and without
// repeats, or an error for an unterminated string, matcher block or range.
func metricNames(expr string) ([]string, error) {
	s := &promScanner{src: expr, names: map[string]bool{}}
	if err := s.scan(); err != nil {
		return nil, fmt.Errorf("%w in %q", err, expr)
	}
	out := make([]string, 0, len(s.names))
	for n := range s.names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// scan consumes the whole expression.
func (s *promScanner) scan() error {
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		var err error
		switch {
		case c == '#':
			s.skipComment()
		case c == '"' || c == '\'' || c == '`':
			_, err = s.readString()
		case c == '{':
			err = s.matchers()
		case c == '[' && strings.HasPrefix(s.src[s.pos:], "[["):
			err = s.skipTo("]]")
		case c == '[':
			err = s.skipTo("]")
		case c == '$':
			s.skipVariable()
		case isDigit(c) || c == '.' && s.pos+1 < len(s.src) && isDigit(s.src[s.pos+1]):
			s.readWord() // a number or a duration: 0.99, 1e3, 0x1F, 5m
		case isIdentStart(c):
			s.identifier()
		default:
			s.pos++ // operators, parentheses, commas, white space
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// identifier handles a word outside matchers: a keyword (with its label
// list, if any), a function, or a metric name.
func (s *promScanner) identifier() {
	word := s.readWord()
	lower := strings.ToLower(word)
	next := s.peekNonSpace()
	switch {
	case labelListKeywords[lower]:
		if next == '(' {
			s.skipParens()
		}
	case promKeywords[lower]:
	case next == '(' || s.aggregationModifierNext():
		// a function or aggregation: its arguments are scanned as usual
	default:
		s.names[word] = true
	}
}

// matchers scans a {...} block; it records the value of a __name__
// equality matcher and skips everything else.
func (s *promScanner) matchers() error {
	start := s.pos
	s.pos++           // skip the brace
	var prev []string // the last tokens: label, operator
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		switch {
		case c == '}':
			s.pos++
			return nil
		case c == '"' || c == '\'' || c == '`':
			v, err := s.readString()
			if err != nil {
				return err
			}
			if len(prev) == 2 && prev[0] == "__name__" && prev[1] == "=" {
				s.names[v] = true
			}
			prev = nil
		case isIdentStart(c):
			prev = []string{s.readWord()}
		case c == '=' || c == '!' || c == '~':
			op := s.readOperator()
			if len(prev) == 1 {
				prev = append(prev, op)
			}
		default:
			s.pos++
		}
	}
	return fmt.Errorf("unterminated label matchers at offset %d", start)
}

// readString consumes a quoted string and returns its content (escapes
// kept as written, which is enough for metric names).
func (s *promScanner) readString() (string, error) {
	start, quote := s.pos, s.src[s.pos]
	s.pos++
	var b strings.Builder
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		switch {
		case c == quote:
			s.pos++
			return b.String(), nil
		case c == '\\' && quote != '`' && s.pos+1 < len(s.src):
			b.WriteByte(s.src[s.pos+1])
			s.pos += 2
			continue
		}
		b.WriteByte(c)
		s.pos++
	}
	return "", fmt.Errorf("unterminated string at offset %d", start)
}

// readOperator consumes a matcher operator: =, !=, =~ or !~.
func (s *promScanner) readOperator() string {
	start := s.pos
	for s.pos < len(s.src) && strings.IndexByte("=!~", s.src[s.pos]) >= 0 {
		s.pos++
	}
	return s.src[start:s.pos]
}

// readWord consumes letters, digits, '_', ':' and '.' (so that numbers
// such as 1.5e3 and durations such as 1h30m are one word).
func (s *promScanner) readWord() string {
	start := s.pos
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		if !isIdentStart(c) && !isDigit(c) && c != '.' {
			break
		}
		s.pos++
	}
	return s.src[start:s.pos]
}

// skipTo consumes everything up to and including end.
func (s *promScanner) skipTo(end string) error {
	i := strings.Index(s.src[s.pos:], end)
	if i < 0 {
		return fmt.Errorf("unterminated %q at offset %d", s.src[s.pos:s.pos+1], s.pos)
	}
	s.pos += i + len(end)
	return nil
}

// skipParens consumes white space and a parenthesized list of names.
func (s *promScanner) skipParens() {
	for s.pos < len(s.src) && s.src[s.pos] != ')' {
		s.pos++
	}
	s.pos++
}

// skipVariable consumes a Grafana variable: $name or ${name...}.
func (s *promScanner) skipVariable() {
	s.pos++
	if s.pos < len(s.src) && s.src[s.pos] == '{' {
		if i := strings.IndexByte(s.src[s.pos:], '}'); i >= 0 {
			s.pos += i + 1
			return
		}
	}
	s.readWord()
}

// skipComment consumes a # comment to the end of its line.
func (s *promScanner) skipComment() {
	if i := strings.IndexByte(s.src[s.pos:], '\n'); i >= 0 {
		s.pos += i + 1
		return
	}
	s.pos = len(s.src)
}

// aggregationModifierNext reports whether the next word is "by" or
// "without", as after the name of an aggregation in "sum by (x) (...)".
func (s *promScanner) aggregationModifierNext() bool {
	i := s.pos
	for i < len(s.src) && strings.IndexByte(" \t\r\n", s.src[i]) >= 0 {
		i++
	}
	j := i
	for j < len(s.src) && (isIdentStart(s.src[j]) || isDigit(s.src[j])) {
		j++
	}
	w := strings.ToLower(s.src[i:j])
	return w == "by" || w == "without"
}

// peekNonSpace returns the next byte that is not white space, or 0.
func (s *promScanner) peekNonSpace() byte {
	for i := s.pos; i < len(s.src); i++ {
		if c := s.src[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':'
}

// variableQueryNames returns the metric names a Grafana Prometheus
// variable query selects: label_values(SELECTOR, label) selects
// SELECTOR's, label_values(label) and label_names() none, query_result(EXPR)
// EXPR's; anything else is read as PromQL.
func variableQueryNames(q string) ([]string, error) {
	q = strings.TrimSpace(q)
	inner, ok := strings.CutPrefix(q, "label_values(")
	if !ok {
		if inner, ok = strings.CutPrefix(q, "query_result("); ok {
			return metricNames(strings.TrimSuffix(inner, ")"))
		}
		if strings.HasPrefix(q, "label_names(") || strings.HasPrefix(q, "metrics(") {
			return nil, nil
		}
		return metricNames(q)
	}
	inner = strings.TrimSuffix(inner, ")")
	comma := strings.LastIndexByte(inner, ',')
	if comma < 0 {
		return nil, nil // label_values(label): every series
	}
	return metricNames(inner[:comma])
}

func TestMetricNames(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`histogram_quantile(0.99, sum by (le, instance) (rate(ferry_raft_commit_seconds_bucket{instance=~"$instance"}[$__rate_interval])))`,
			[]string{"ferry_raft_commit_seconds_bucket"}},
		{`(ferry_wal_disk_bytes - ferry_wal_live_bytes) / ferry_wal_disk_bytes > 0.8 and deriv(ferry_wal_disk_bytes[30m]) > 0`,
			[]string{"ferry_wal_disk_bytes", "ferry_wal_live_bytes"}},
		{`sum(rate(a_total{event="sent", q=~"x|y(z)}"}[5m])) by (queue) / ignoring(event) group_left sum(b:rate5m)`,
			[]string{"a_total", "b:rate5m"}},
		{`{__name__="ferry_partition_dead", queue!="q"} + on (queue) group_right (partition) {queue="q", __name__ = 'other'}`,
			[]string{"ferry_partition_dead", "other"}},
		{`max by (group, queue, partition) (ferry_raft_leader_is_local) == 0`, []string{"ferry_raft_leader_is_local"}},
		{`count(up == bool 1) offset 5m AND ON() vector(1) UNLESS Inf * NaN - 1e3 + 0x1F + .5`, []string{"up"}},
		{"rate(a[1m]) # b is commented out\n + c", []string{"a", "c"}},
		{`label_replace(m, "dst", "$1", "src", "(.*)") * ${factor} + [[legacy]]`, []string{"m"}},
		{`sum without (instance) (x) unless on (queue) y`, []string{"x", "y"}},
		{"sum by(queue)(x) + COUNT\n  WITHOUT (a) (y)", []string{"x", "y"}},
		{`min_over_time(z[5m:1m] @ end())`, []string{"z"}},
		{`42`, []string{}},
	}
	for _, c := range cases {
		got, err := metricNames(c.expr)
		if err != nil {
			t.Errorf("metricNames(%q): %v", c.expr, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
	for _, bad := range []string{`rate(a{b="c}[1m])`, `a{b="c"`, `rate(a[5m)`, `a + "b`} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%q) = %q, want an error", bad, got)
		}
	}
}

func TestVariableQueryNames(t *testing.T) {
	cases := map[string][]string{
		`label_values(ferry_client_connections, instance)`:                  {"ferry_client_connections"},
		`label_values(ferry_partition_ready{instance=~"$instance"}, queue)`: {"ferry_partition_ready"},
		`label_values(instance)`:                                            nil,
		`query_result(topk(5, sum by (queue) (ferry_partition_ready)))`:     {"ferry_partition_ready"},
		`label_names()`: nil,
		`sum by (queue) (ferry_partition_in_flight)`: {"ferry_partition_in_flight"},
	}
	for q, want := range cases {
		got, err := variableQueryNames(q)
		if err != nil {
			t.Errorf("variableQueryNames(%q): %v", q, err)
			continue
		}
		if !slices.Equal(got, want) { // nil and empty are equal
			t.Errorf("variableQueryNames(%q) = %q, want %q", q, got, want)
		}
	}
}
