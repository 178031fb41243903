// Package benchline is the figure line of fencegate's bench commands: a value,
// the baseline measured in the same run, their ratio and the goal that
// bounds it, printed as text, JSON lines or Markdown table rows.
package benchline

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Line is one figure with its baseline from the same run and its goal.
// Ratio is Value/Baseline; the goal bounds the ratio (Min or Max).
type Line struct {
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Baseline float64 `json:"baseline"`
	BaseName string  `json:"baseline_name"`
	Ratio    float64 `json:"ratio"`
	Goal     string  `json:"goal"`
	Met      bool    `json:"met"`
	Runs     int     `json:"runs"` // measurements the value is the median of
}

// AtLeast and AtMost fill the ratio, goal and met of l.
func (l Line) AtLeast(min float64) Line {
	l.Ratio = RatioOf(l.Value, l.Baseline)
	l.Goal = fmt.Sprintf("ratio >= %.2f", min)
	l.Met = l.Baseline > 0 && l.Ratio >= min
	return l
}

func (l Line) AtMost(max float64) Line {
	l.Ratio = RatioOf(l.Value, l.Baseline)
	l.Goal = fmt.Sprintf("ratio <= %.2f", max)
	l.Met = l.Baseline > 0 && l.Ratio <= max
	return l
}

// RatioOf is a/b, or 0 when b is not positive.
func RatioOf(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// Printer writes lines as text, as one JSON object per line, or as the
// rows of a Markdown table (docs/benchmarks.md is made from it).
type Printer struct {
	Out      io.Writer
	JSON     bool
	Markdown bool
	started  bool // markdown: the table head is written
}

func (p *Printer) Header(format string, args ...any) {
	switch {
	case p.Markdown:
		fmt.Fprintf(p.Out, "\n"+format+"\n\n", args...)
		p.started = false
	case !p.JSON:
		fmt.Fprintf(p.Out, format+"\n", args...)
	}
}

func (p *Printer) Print(l Line) error {
	if p.Markdown {
		return p.row(l)
	}
	if p.JSON {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.Out, "%s\n", b)
		return err
	}
	met := "NOT MET"
	if l.Met {
		met = "met"
	}
	_, err := fmt.Fprintf(p.Out, "%-58s %10.3f %-10s baseline %10.3f (%s)  ratio %6.3f  goal %-14s %s\n",
		l.Name, l.Value, l.Unit, l.Baseline, l.BaseName, l.Ratio, l.Goal, met)
	return err
}

// Median returns the median of vs (the mean of the middle two for an even
// count), 0 for none.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func (p *Printer) row(l Line) error {
	if !p.started {
		p.started = true
		fmt.Fprintln(p.Out, "| figure | value | baseline (same run) | ratio | goal | met |")
		fmt.Fprintln(p.Out, "|---|---|---|---|---|---|")
	}
	met := "**no**"
	if l.Met {
		met = "yes"
	}
	_, err := fmt.Fprintf(p.Out, "| %s | %s %s | %s (%s) | %.2f | %s | %s |\n",
		l.Name, short(l.Value), l.Unit, short(l.Baseline), l.BaseName, l.Ratio, strings.TrimPrefix(l.Goal, "ratio "), met)
	return err
}

// short formats v with three significant digits, or whole from 100 up.
func short(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
