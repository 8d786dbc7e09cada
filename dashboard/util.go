package dashboard

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ferrymq/ferry/client"
)

// encodeRefs writes dead-letter references as "partition:seq" separated
// by spaces, the form the apply step reads back.
func encodeRefs(ls []client.DeadLetter) string {
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%d", l.Partition, l.Seq)
	}
	return b.String()
}

// decodeRefs reads encodeRefs' form: at most deadActionMax references,
// partitions 0..63.
func decodeRefs(s string) ([]client.LetterRef, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, fmt.Errorf("no dead letters selected")
	}
	if len(fields) > deadActionMax {
		return nil, fmt.Errorf("%d dead letters selected, at most %d at once", len(fields), deadActionMax)
	}
	out := make([]client.LetterRef, 0, len(fields))
	for _, f := range fields {
		ps, ss, ok := strings.Cut(f, ":")
		p, err1 := strconv.Atoi(ps)
		seq, err2 := strconv.ParseUint(ss, 10, 64)
		if !ok || err1 != nil || err2 != nil || p < 0 || p > 63 {
			return nil, fmt.Errorf("bad dead-letter reference %q", f)
		}
		out = append(out, client.LetterRef{Partition: p, Seq: seq})
	}
	return out, nil
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// printable says whether a body can be shown as text.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
	}
	return true
}

// reasonName is a dead-letter reason as the filter names it.
func reasonName(r client.DeadReason) string {
	return strings.ReplaceAll(r.String(), " ", "_")
}

// age prints how long ago t was, to the second.
func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}

// nanos prints a duration given in nanoseconds, to the second ("-" for 0).
func nanos(ns int64) string {
	if ns <= 0 {
		return "-"
	}
	return time.Duration(ns).Round(time.Second).String()
}

func rate(v float64) string {
	if v == 0 {
		return "0"
	}
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

var funcs = template.FuncMap{
	"reason": reasonName, "age": age, "nanos": nanos, "rate": rate, "compact": func(v int64) string { return compact(float64(v)) },
	"unixTime": func(ns int64) time.Time { return time.Unix(0, ns) },
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"hex": func(b []byte) string {
		if len(b) > 4096 {
			b = b[:4096]
		}
		return fmt.Sprintf("% x", b)
	},
}
