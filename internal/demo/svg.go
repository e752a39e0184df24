package demo

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Timeline geometry, in SVG user units.
const (
	svgWidth   = 1280
	svgLeft    = 110
	svgRight   = 30
	svgTop     = 70
	svgRowH    = 46
	svgBarH    = 22
	svgLegendH = 90
)

// termColors are the fills of successive terms.
var termColors = []string{"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f"}

// WriteSVG draws the run's timeline: a row per replica with its terms (from
// the sending of the acquiring write to the end of the term context), the
// moments its replays ran, its term became ready and its first render was
// made, and the faults; a row for the world's changes on top.
func (r *Report) WriteSVG(w io.Writer) error {
	s := newSVG(r)
	s.header()
	s.rowsAndAxis()
	s.pauses()
	for i, t := range r.Terms {
		s.term(i, t)
	}
	for _, m := range r.Marks {
		s.mark(m)
	}
	s.legend()
	s.p("</svg>\n")
	_, err := io.WriteString(w, s.b.String())
	return err
}

// svg is one drawing of a report's timeline.
type svg struct {
	r     *Report
	rows  []string // "world", then the replicas
	end   time.Duration
	span  float64 // width of the time axis
	axisY float64
	b     strings.Builder
}

func newSVG(r *Report) *svg {
	// The axis runs a sixteenth past the run's end: a run stops right after its
	// last hand-over, and the last term (a sliver at that scale) and its label
	// need room after it.
	s := &svg{r: r, rows: append([]string{"world"}, r.Replicas...), end: r.Duration + r.Duration/16}
	if s.end <= 0 {
		s.end = time.Second
	}
	s.span = float64(svgWidth - svgLeft - svgRight)
	s.axisY = float64(svgTop + len(s.rows)*svgRowH)
	return s
}

func (s *svg) p(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

// x is the abscissa of t, clamped to the run.
func (s *svg) x(t time.Time) float64 {
	d := min(max(t.Sub(s.r.Started), 0), s.end)
	return svgLeft + s.span*float64(d)/float64(s.end)
}

// rowY is the top of the named row; the world's for an unknown name.
func (s *svg) rowY(name string) float64 {
	return float64(svgTop + max(slices.Index(s.rows, name), 0)*svgRowH)
}

func (s *svg) header() {
	r := s.r
	height := svgTop + len(s.rows)*svgRowH + svgLegendH
	s.p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	s.p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	passed, total := r.Checks()
	s.p(`<text x="%d" y="24" font-size="16" font-weight="bold">Baton demo: %d replicas, %s, seed %d: %s (%d/%d checks)</text>`+"\n",
		svgLeft, r.Options.Replicas, count(len(r.Failovers), "failover"), r.Options.Seed, r.verdict(), passed, total)
	s.p(`<text x="%d" y="44" fill="#555">lease %v / renew %v / retry %v; a bar is a term, from its acquiring write to the end of its term context</text>`+"\n",
		svgLeft, r.Options.LeaseDuration, r.Options.RenewDeadline, r.Options.RetryPeriod)
}

func (s *svg) rowsAndAxis() {
	for i, name := range s.rows {
		y := float64(svgTop + i*svgRowH)
		if i%2 == 1 {
			s.p(`<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="#f6f6f6"/>`+"\n", svgLeft, y, s.span, svgRowH)
		}
		s.p(`<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", svgLeft-10, y+svgRowH/2, html.EscapeString(name))
	}
	step := tickStep(s.end)
	for d := time.Duration(0); d <= s.end; d += step {
		tx := svgLeft + s.span*float64(d)/float64(s.end)
		s.p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", tx, svgTop, tx, s.axisY)
		s.p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%gs</text>`+"\n", tx, s.axisY+16, d.Seconds())
	}
}

// pauses draws, under the terms, each pause until its resume.
func (s *svg) pauses() {
	for _, m := range s.r.Marks {
		if m.Kind != MarkPause {
			continue
		}
		until := s.r.Started.Add(s.end)
		for _, n := range s.r.Marks {
			if n.Kind == MarkResume && n.Replica == m.Replica && !n.At.Before(m.At) {
				until = n.At
				break
			}
		}
		y := s.rowY(m.Replica)
		s.p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="#bbb" fill-opacity="0.45" stroke="#888" stroke-dasharray="3,2"><title>%s %s (store calls hang)</title></rect>`+"\n",
			s.x(m.At), y+4, math.Max(s.x(until)-s.x(m.At), 1), svgRowH-8, html.EscapeString(m.Replica), html.EscapeString(m.Text))
	}
}

// term draws the i-th term's bar and the marks of its start.
func (s *svg) term(i int, t TermRecord) {
	esc, start := html.EscapeString, s.r.Started
	y := s.rowY(t.Replica) + (svgRowH-svgBarH)/2
	x0 := s.x(t.Sent)
	stop := t.End
	if stop.IsZero() {
		stop = start.Add(s.end)
	}
	wd := math.Max(s.x(stop)-x0, 2)
	title := fmt.Sprintf("term %d led by %s (incarnation %d): acquired %s", t.Term, t.Replica, t.Incarnation, secs(t.Sent, start))
	if !t.Ready.IsZero() {
		title += fmt.Sprintf(", ready %v later", t.ReadyLatency)
	}
	if t.LostReason != "" {
		title += ", lost: " + t.LostReason
	}
	s.p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" rx="3" fill="%s"><title>%s</title></rect>`+"\n",
		x0, y, wd, svgBarH, termColors[i%len(termColors)], esc(title))
	// The label goes inside a bar wide enough for it, else just after it, or
	// just before it where after it would leave the drawing.
	label := fmt.Sprintf("t%d", t.Term)
	switch {
	case wd > 34:
		s.p(`<text x="%.1f" y="%.1f" fill="white" font-weight="bold">t%d</text>`+"\n", x0+4, y+svgBarH/2+4, t.Term)
	case x0+wd+2+labelWidth(label) > svgWidth:
		s.p(`<text x="%.1f" y="%.1f" fill="#333" font-size="10" font-weight="bold" text-anchor="end">t%d</text>`+"\n", x0-2, y+svgBarH/2+4, t.Term)
	default:
		s.p(`<text x="%.1f" y="%.1f" fill="#333" font-size="10" font-weight="bold">t%d</text>`+"\n", x0+wd+2, y+svgBarH/2+4, t.Term)
	}
	// The marks of a term's start are simultaneous at this scale: the ready
	// mark goes above the bar, the replays and the first render below it,
	// with the latencies as text.
	for _, at := range t.Replays {
		s.p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#1f4e99" stroke-width="2"><title>replays ran (term %d) at %s</title></line>`+"\n",
			s.x(at), y+svgBarH, s.x(at), y+svgBarH+9, t.Term, secs(at, start))
	}
	if !t.Ready.IsZero() {
		s.p(`<path d="M%.1f %.1f l-4 -7 h8 z" fill="#2ca02c"><title>term %d ready %v after the lease was acquired</title></path>`+"\n",
			s.x(t.Ready), y-1, t.Term, t.ReadyLatency)
	}
	if t.FirstRender != nil {
		s.p(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="#ff7f0e" stroke="white"><title>first render of term %d, %v after the lease was acquired: config %s, pods generation %d</title></circle>`+"\n",
			s.x(t.RenderAt)+5, y+svgBarH+5, t.Term, t.RenderAt.Sub(t.Acquired), esc(short(t.FirstRender.ConfigVersion)), t.FirstRender.PodGeneration)
	}
	if !t.Ready.IsZero() && wd > 90 {
		s.p(`<text x="%.1f" y="%.1f" font-size="10" fill="#555">ready +%v</text>`+"\n", x0+14, y+svgBarH+10, round(t.ReadyLatency))
	}
}

// mark draws a fault, a restart or a world change.
func (s *svg) mark(m Mark) {
	esc := html.EscapeString
	mx := s.x(m.At)
	switch m.Kind {
	case MarkKill, MarkCrash, MarkRelease, MarkStall, MarkRestart, MarkResume, MarkReport:
		g := glyphs[m.Kind]
		y := s.rowY(m.Replica) + 12
		if m.Kind == MarkRestart || m.Kind == MarkReport {
			// Below, where it does not cover a release or the crash at the same moment.
			y += svgRowH - 16
		}
		s.p(`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="15" fill="%s">%s<title>%s %s at %s</title></text>`+"\n",
			mx, y, g.color, g.sym, esc(m.Replica), esc(m.Text), secs(m.At, s.r.Started))
	case MarkConfig, MarkInvalid, MarkPods:
		color := map[string]string{MarkConfig: "#1f77b4", MarkInvalid: "#d62728", MarkPods: "#2ca02c"}[m.Kind]
		// Configuration changes on the upper half of the row, pods on the lower.
		y := s.rowY("world") + svgRowH/2 - 9
		if m.Kind == MarkPods {
			y += 14
		}
		s.p(`<path d="M%.1f %.1f l5 5 l-5 5 l-5 -5 z" fill="%s"><title>%s at %s</title></path>`+"\n", mx, y-5, color, esc(m.Text), secs(m.At, s.r.Started))
	case MarkFailed:
		s.p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#d62728">!<title>%s: %s failed</title></text>`+"\n",
			mx, s.rowY(m.Replica)+svgRowH-4, esc(m.Replica), esc(m.Text))
	}
}

// legendItems are the legend's entries, in two lines of six.
var legendItems = []struct{ shape, text string }{
	{`<rect x="0" y="-9" width="22" height="12" rx="2" fill="#4e79a7"/>`, "term (one colour each)"},
	{`<line x1="11" y1="-10" x2="11" y2="-1" stroke="#1f4e99" stroke-width="2"/>`, "replays ran"},
	{`<path d="M11 -2 l-4 -7 h8 z" fill="#2ca02c"/>`, "term ready"},
	{`<circle cx="11" cy="-4" r="3.5" fill="#ff7f0e"/>`, "first render"},
	{`<text x="11" y="0" text-anchor="middle" font-size="15" fill="#d62728">✕</text>`, "kill (purple: crash, reported)"},
	{`<rect x="0" y="-10" width="22" height="13" fill="#bbb" fill-opacity="0.45" stroke="#888" stroke-dasharray="3,2"/>`, "paused"},
	{`<text x="11" y="0" text-anchor="middle" font-size="15">⏏</text>`, "release"},
	{`<text x="11" y="0" text-anchor="middle" font-size="15" fill="#9467bd">⚑</text>`, "kubelet's report"},
	{`<text x="11" y="0" text-anchor="middle" font-size="15" fill="#e15759">⚠</text>`, "leads without a component"},
	{`<text x="11" y="0" text-anchor="middle" font-size="15">↻</text>`, "restart"},
	{`<path d="M11 -9 l5 5 l-5 5 l-5 -5 z" fill="#1f77b4"/>`, "config change (red: invalid)"},
	{`<path d="M11 -9 l5 5 l-5 5 l-5 -5 z" fill="#2ca02c"/>`, "pods change"},
}

func (s *svg) legend() {
	lx, ly := float64(svgLeft), s.axisY+40
	for i, it := range legendItems {
		if i == 6 {
			lx, ly = svgLeft, ly+24
		}
		s.p(`<g transform="translate(%.1f %.1f)">%s<text x="28" y="0">%s</text></g>`+"\n", lx, ly, it.shape, html.EscapeString(it.text))
		lx += 30 + float64(8*len(it.text)) + 24
	}
}

// glyphs draw the replica marks.
var glyphs = map[string]struct{ sym, color string }{
	MarkKill:    {"✕", "#d62728"},
	MarkCrash:   {"✕", "#9467bd"},
	MarkRelease: {"⏏", "#444"},
	MarkStall:   {"⚠", "#e15759"},
	MarkReport:  {"⚑", "#9467bd"},
	MarkRestart: {"↻", "#444"},
	MarkResume:  {"▶", "#444"},
}

// tickStep is the spacing of the axis ticks: 1, 2, 5, 10, ... seconds, for
// about ten ticks.
func tickStep(end time.Duration) time.Duration {
	for _, s := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute} {
		if end/s <= 12 {
			return s
		}
	}
	return 5 * time.Minute
}

// labelWidth is about how wide a term's label is drawn at font size 10.
func labelWidth(label string) float64 { return 7 * float64(len(label)) }

func secs(t, start time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(start).Seconds()) }
