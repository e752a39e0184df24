package demo

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// recentLines is how many log lines the live view keeps on screen.
const recentLines = 12

// view writes the run's log: line by line, or, live, as part of a frame
// redrawn in place. Logging never blocks on the output: the replicas log
// from their own goroutines (hooks of the runtime among them), which must
// not wait for a terminal.
type view struct {
	out   io.Writer
	live  bool
	start time.Time
	// lines carries the log lines of the plain mode to printLines.
	lines chan string
	// outMu serializes writes to out; it is never held by logf, so a slow
	// terminal cannot hold up a replica that logs.
	outMu sync.Mutex

	// mu guards the fields below.
	mu     sync.Mutex
	recent []string
	step   string
	drawn  bool // a frame is on screen
	closed bool // lines is closed
	lost   int  // lines dropped because the printer fell behind
}

// lineBuffer is how many log lines the plain mode holds for the printer.
const lineBuffer = 4096

func newView(out io.Writer, live bool, start time.Time) *view {
	return &view{out: out, live: live, start: start, lines: make(chan string, lineBuffer)}
}

func (v *view) elapsed() string {
	return fmt.Sprintf("%6.2fs", time.Since(v.start).Seconds())
}

// logf records one line of the run's log without blocking.
func (v *view) logf(format string, args ...any) {
	line := v.elapsed() + "  " + fmt.Sprintf(format, args...)
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.live {
		if v.closed {
			return
		}
		select {
		case v.lines <- line:
		default:
			v.lost++
		}
		return
	}
	v.recent = append(v.recent, line)
	if n := len(v.recent) - recentLines; n > 0 {
		v.recent = append(v.recent[:0], v.recent[n:]...)
	}
}

// printLines prints the plain mode's lines until closeLines.
func (v *view) printLines() {
	for line := range v.lines {
		v.outMu.Lock()
		fmt.Fprintln(v.out, line)
		v.outMu.Unlock()
	}
}

// lostLines returns how many log lines were dropped.
func (v *view) lostLines() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lost
}

// closeLines ends printLines once it printed what is queued.
func (v *view) closeLines() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.closed {
		v.closed = true
		close(v.lines)
	}
}

// setStep says what the run is doing now, for the live view's header.
func (v *view) setStep(format string, args ...any) {
	v.mu.Lock()
	v.step = fmt.Sprintf(format, args...)
	v.mu.Unlock()
}

// draw redraws the frame: the cursor goes home, each line is written over
// the previous frame's and cleared to its end, and what is below is
// cleared.
func (v *view) draw(frame []string) {
	v.mu.Lock()
	first := !v.drawn
	v.drawn = true
	step, recent := v.step, append([]string(nil), v.recent...)
	v.mu.Unlock()
	var b strings.Builder
	b.WriteString("\x1b[H")
	if first {
		b.WriteString("\x1b[2J\x1b[H")
	}
	for _, l := range frame {
		b.WriteString(l)
		b.WriteString("\x1b[K\n")
	}
	b.WriteString("\n" + bold("now") + "  " + step + "\x1b[K\n\n")
	b.WriteString(bold("recent") + "\x1b[K\n")
	for _, l := range recent {
		b.WriteString("  " + l + "\x1b[K\n")
	}
	b.WriteString("\x1b[J")
	v.outMu.Lock()
	defer v.outMu.Unlock()
	_, _ = io.WriteString(v.out, b.String())
}

func bold(s string) string { return "\x1b[1m" + s + "\x1b[0m" }

// frame renders the state of the run as lines.
func (e *engine) frame() []string {
	o := e.opts
	lines := []string{
		bold("Baton demo") + fmt.Sprintf("  %d replicas · %s · lease %v / renew %v / retry %v · seed %d · %s of %s",
			o.Replicas, count(o.Failovers, "failover"), o.LeaseDuration, o.RenewDeadline, o.RetryPeriod, o.Seed, strings.TrimSpace(e.view.elapsed()), about(o.Estimate())),
		"",
		e.world.describe(),
	}
	if p, err := e.published(); err == nil {
		status := string(p.Status)
		if len(p.Reasons) > 0 {
			status += ": " + strings.Join(p.Reasons, "; ")
		}
		lines = append(lines, fmt.Sprintf("published  term %d by %s · config %s · pods generation %d · %s",
			p.Term, p.PublishedBy, short(p.ConfigVersion), p.PodGeneration, status))
	} else {
		lines = append(lines, "published  nothing yet")
	}
	lines = append(lines, "", fmt.Sprintf("%-9s %-9s %5s  %-30s %-26s %s", "REPLICA", "STATE", "TERM", "CONFIG-PUBLISHER", "DEPLOYMENT-SCHEDULER", "COORDINATOR"))
	for _, n := range e.current() {
		lines = append(lines, n.row())
	}
	lines = append(lines, "TERM: the lease's resourceVersion at its acquisition; every lease write raises it, so terms jump (1, 15, 33, ...)")
	return lines
}

// row is the node's line in the live view.
func (n *node) row() string {
	state, term := n.state(), "-"
	pub, sched, coord := "-", "-", "-"
	if n.r != nil {
		st := n.r.Manager().Status()
		if st.Leading {
			term = fmt.Sprint(st.Term)
			if state != "leader" {
				term = "(" + term + ")"
			}
		}
		if p := n.r.Publisher().State(); p.Running {
			pub = fmt.Sprintf("cfg %s pods g%d", short(p.ConfigVersion), p.PodGeneration)
			if p.Last.Term != 0 {
				pub += fmt.Sprintf(" wrote t%d", p.Last.Term)
			}
			if p.Invalid {
				pub += " (invalid)"
			}
			if p.Fenced {
				pub += " FENCED"
			}
		}
		if s := n.r.Scheduler().State(); s.Running {
			sched = fmt.Sprintf("cfg %s g%d #%d", short(s.ConfigVersion), s.PodGeneration, s.Last.Sequence)
			if s.Pending {
				sched += " pending"
			}
		}
		if c := n.r.Coordinator().Status(); c.Running {
			coord = fmt.Sprintf("runs %d", c.Runs)
			if c.Last != nil {
				coord += fmt.Sprintf(" last cfg %s g%d", short(c.Last.ConfigVersion), c.Last.PodGeneration)
			}
		}
	}
	return fmt.Sprintf("%-9s %-9s %5s  %-30s %-26s %s", n.id, state, term, pub, sched, coord)
}
