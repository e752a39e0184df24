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
	rows := append([]string{"world"}, r.Replicas...)
	height := svgTop + len(rows)*svgRowH + svgLegendH
	end := r.Duration
	if end <= 0 {
		end = time.Second
	}
	span := float64(svgWidth - svgLeft - svgRight)
	x := func(t time.Time) float64 {
		d := t.Sub(r.Started)
		d = min(max(d, 0), end)
		return svgLeft + span*float64(d)/float64(end)
	}
	rowY := func(name string) float64 {
		i := slices.Index(rows, name)
		if i < 0 {
			i = 0
		}
		return float64(svgTop + i*svgRowH)
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	esc := html.EscapeString

	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	passed, total := r.Checks()
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	p(`<text x="%d" y="24" font-size="16" font-weight="bold">Baton demo: %d replicas, %d failovers, seed %d: %s (%d/%d checks)</text>`+"\n",
		svgLeft, r.Options.Replicas, len(r.Failovers), r.Options.Seed, verdict, passed, total)
	p(`<text x="%d" y="44" fill="#555">lease %v / renew %v / retry %v; a bar is a term, from its acquiring write to the end of its term context</text>`+"\n",
		svgLeft, r.Options.LeaseDuration, r.Options.RenewDeadline, r.Options.RetryPeriod)

	// Rows and the time axis.
	axisY := float64(svgTop + len(rows)*svgRowH)
	for i, name := range rows {
		y := float64(svgTop + i*svgRowH)
		if i%2 == 1 {
			p(`<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="#f6f6f6"/>`+"\n", svgLeft, y, span, svgRowH)
		}
		p(`<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", svgLeft-10, y+svgRowH/2, esc(name))
	}
	step := tickStep(end)
	for d := time.Duration(0); d <= end; d += step {
		tx := svgLeft + span*float64(d)/float64(end)
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", tx, svgTop, tx, axisY)
		p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%gs</text>`+"\n", tx, axisY+16, d.Seconds())
	}

	// Pauses, drawn under the terms: from each pause to its resume.
	for _, m := range r.Marks {
		if m.Kind != MarkPause {
			continue
		}
		until := r.Started.Add(end)
		for _, n := range r.Marks {
			if n.Kind == MarkResume && n.Replica == m.Replica && !n.At.Before(m.At) {
				until = n.At
				break
			}
		}
		y := rowY(m.Replica)
		p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="#bbb" fill-opacity="0.45" stroke="#888" stroke-dasharray="3,2"><title>%s paused (store calls hang)</title></rect>`+"\n",
			x(m.At), y+4, math.Max(x(until)-x(m.At), 1), svgRowH-8, esc(m.Replica))
	}

	// Terms.
	for i, t := range r.Terms {
		y := rowY(t.Replica) + (svgRowH-svgBarH)/2
		x0 := x(t.Sent)
		stop := t.End
		if stop.IsZero() {
			stop = r.Started.Add(end)
		}
		wd := math.Max(x(stop)-x0, 2)
		title := fmt.Sprintf("term %d led by %s (incarnation %d): acquired %s", t.Term, t.Replica, t.Incarnation, secs(t.Sent, r.Started))
		if !t.Ready.IsZero() {
			title += fmt.Sprintf(", ready %v later", t.ReadyLatency)
		}
		if t.LostReason != "" {
			title += ", lost: " + t.LostReason
		}
		p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" rx="3" fill="%s"><title>%s</title></rect>`+"\n",
			x0, y, wd, svgBarH, termColors[i%len(termColors)], esc(title))
		if wd > 34 {
			p(`<text x="%.1f" y="%.1f" fill="white" font-weight="bold">t%d</text>`+"\n", x0+4, y+svgBarH/2+4, t.Term)
		}
		// The marks of a term's start are simultaneous at this scale: the
		// ready mark goes above the bar, the replays and the first render
		// below it, with the latencies as text.
		for _, at := range t.Replays {
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#1f4e99" stroke-width="2"><title>replays ran (term %d) at %s</title></line>`+"\n",
				x(at), y+svgBarH, x(at), y+svgBarH+9, t.Term, secs(at, r.Started))
		}
		if !t.Ready.IsZero() {
			p(`<path d="M%.1f %.1f l-4 -7 h8 z" fill="#2ca02c"><title>term %d ready %v after the lease was acquired</title></path>`+"\n",
				x(t.Ready), y-1, t.Term, t.ReadyLatency)
		}
		if t.FirstRender != nil {
			p(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="#ff7f0e" stroke="white"><title>first render of term %d, %v after the lease was acquired: config %s, pods generation %d</title></circle>`+"\n",
				x(t.RenderAt)+5, y+svgBarH+5, t.Term, t.RenderAt.Sub(t.Acquired), esc(short(t.FirstRender.ConfigVersion)), t.FirstRender.PodGeneration)
		}
		if !t.Ready.IsZero() && wd > 90 {
			p(`<text x="%.1f" y="%.1f" font-size="10" fill="#555">ready +%v</text>`+"\n", x0+14, y+svgBarH+10, round(t.ReadyLatency))
		}
	}

	// Faults, restarts and world changes.
	for _, m := range r.Marks {
		mx := x(m.At)
		switch m.Kind {
		case MarkKill, MarkRelease, MarkRestart, MarkResume:
			g := glyphs[m.Kind]
			y := rowY(m.Replica) + 12
			if m.Kind == MarkRestart {
				y += svgRowH - 16 // below, where it does not cover a release at the same moment
			}
			p(`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="15" fill="%s">%s<title>%s %s at %s</title></text>`+"\n",
				mx, y, g.color, g.sym, esc(m.Replica), esc(m.Text), secs(m.At, r.Started))
		case MarkConfig, MarkInvalid, MarkPods:
			color := map[string]string{MarkConfig: "#1f77b4", MarkInvalid: "#d62728", MarkPods: "#2ca02c"}[m.Kind]
			// Configuration changes on the upper half of the row, pods on the lower.
			y := rowY("world") + svgRowH/2 - 9
			if m.Kind == MarkPods {
				y += 14
			}
			p(`<path d="M%.1f %.1f l5 5 l-5 5 l-5 -5 z" fill="%s"><title>%s at %s</title></path>`+"\n", mx, y-5, color, esc(m.Text), secs(m.At, r.Started))
		case MarkFailed:
			p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#d62728">!<title>%s: %s failed</title></text>`+"\n",
				mx, rowY(m.Replica)+svgRowH-4, esc(m.Replica), esc(m.Text))
		}
	}

	// Legend.
	ly := axisY + 40
	items := []struct{ shape, text string }{
		{`<rect x="0" y="-9" width="22" height="12" rx="2" fill="#4e79a7"/>`, "term (one colour each)"},
		{`<line x1="11" y1="-10" x2="11" y2="-1" stroke="#1f4e99" stroke-width="2"/>`, "replays ran"},
		{`<path d="M11 -2 l-4 -7 h8 z" fill="#2ca02c"/>`, "term ready"},
		{`<circle cx="11" cy="-4" r="3.5" fill="#ff7f0e"/>`, "first render"},
		{`<text x="11" y="0" text-anchor="middle" font-size="15" fill="#d62728">✕</text>`, "kill"},
		{`<rect x="0" y="-10" width="22" height="13" fill="#bbb" fill-opacity="0.45" stroke="#888" stroke-dasharray="3,2"/>`, "paused"},
		{`<text x="11" y="0" text-anchor="middle" font-size="15">⏏</text>`, "release"},
		{`<text x="11" y="0" text-anchor="middle" font-size="15">↻</text>`, "restart"},
		{`<path d="M11 -9 l5 5 l-5 5 l-5 -5 z" fill="#1f77b4"/>`, "config change (red: invalid)"},
		{`<path d="M11 -9 l5 5 l-5 5 l-5 -5 z" fill="#2ca02c"/>`, "pods change"},
	}
	lx := float64(svgLeft)
	for i, it := range items {
		if i == 5 {
			lx, ly = svgLeft, ly+24
		}
		p(`<g transform="translate(%.1f %.1f)">%s<text x="28" y="0">%s</text></g>`+"\n", lx, ly, it.shape, esc(it.text))
		lx += 30 + float64(8*len(it.text)) + 24
	}
	p("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// glyphs draw the replica marks.
var glyphs = map[string]struct{ sym, color string }{
	MarkKill:    {"✕", "#d62728"},
	MarkRelease: {"⏏", "#444"},
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

func secs(t, start time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(start).Seconds()) }
