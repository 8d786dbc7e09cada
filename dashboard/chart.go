package dashboard

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

// series is one line of a chart.
type series struct {
	Name   string
	Color  string
	Values []float64
}

const (
	chartWidth  = 560
	chartHeight = 160
	chartPad    = 28
)

// chartSVG draws the series over the sample times as an inline SVG with a
// legend, the top of the scale, and the time span. With fewer than two
// samples it says that samples are being gathered.
func chartSVG(title string, at []time.Time, ss []series) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartWidth, chartHeight, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="4" y="12" class="title">%s</text>`, template.HTMLEscapeString(title))
	if len(at) < 2 {
		b.WriteString(`<text x="40" y="80">gathering samples…</text></svg>`)
		return template.HTML(b.String())
	}
	top := 1.0
	for _, s := range ss {
		for _, v := range s.Values {
			top = max(top, v)
		}
	}
	x0, x1 := float64(chartPad+20), float64(chartWidth-8)
	y0, y1 := float64(chartHeight-chartPad), float64(20)
	span := at[len(at)-1].Sub(at[0]).Seconds()
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" class="axis"/>`, x0, y0, x1, y0)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" class="axis"/>`, x0, y0, x0, y1)
	fmt.Fprintf(&b, `<text x="2" y="%.0f" class="tick">%s</text>`, y1+4, compact(top))
	fmt.Fprintf(&b, `<text x="2" y="%.0f" class="tick">0</text>`, y0)
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" class="tick">-%s</text>`, x0, chartHeight-8, (time.Duration(span) * time.Second).String())
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" class="tick" text-anchor="end">now</text>`, x1, chartHeight-8)
	for i, s := range ss {
		var pts []string
		for j, v := range s.Values {
			if j >= len(at) {
				break
			}
			x := x0
			if span > 0 {
				x += (x1 - x0) * at[j].Sub(at[0]).Seconds() / span
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y0-(y0-y1)*v/top))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, s.Color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%d" y="12" fill="%s" class="legend">%s</text>`, 160+i*100, s.Color, template.HTMLEscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// compact prints a number briefly: 950, 12.5k, 3.1M.
func compact(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v == float64(int64(v)):
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}

// depthChart and rateChart draw a queue's history.
func depthChart(ss []Sample) template.HTML {
	at, ready, inflight, delayed, dead := make([]time.Time, len(ss)), make([]float64, len(ss)), make([]float64, len(ss)),
		make([]float64, len(ss)), make([]float64, len(ss))
	for i, s := range ss {
		at[i], ready[i], inflight[i], delayed[i], dead[i] = s.At, float64(s.Ready), float64(s.InFlight), float64(s.Delayed), float64(s.Dead)
	}
	return chartSVG("depth", at, []series{{"ready", "#1f77b4", ready}, {"in flight", "#ff7f0e", inflight},
		{"delayed", "#7f7f7f", delayed}, {"dead", "#d62728", dead}})
}

func rateChart(ss []Sample) template.HTML {
	if len(ss) < 2 {
		return chartSVG("rates (per second)", nil, nil)
	}
	n := len(ss) - 1
	at, send, ack, nack, dl := make([]time.Time, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i := 1; i < len(ss); i++ {
		r := ratesOf(ss[i-1 : i+1])
		at[i-1], send[i-1], ack[i-1], nack[i-1], dl[i-1] = ss[i].At, r.Send, r.Ack, r.Nack, r.DeadLetter
	}
	return chartSVG("rates (per second)", at, []series{{"send", "#2ca02c", send}, {"ack", "#1f77b4", ack},
		{"nack", "#ff7f0e", nack}, {"dead-letter", "#d62728", dl}})
}
