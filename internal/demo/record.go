package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// TermRecord is what the run saw of one leadership term.
type TermRecord struct {
	Term        uint64
	Replica     string
	Incarnation int // 1 for a replica's first start, 2 after its first restart, ...
	// Sent is when the acquiring write was sent; End is when the elector's
	// term context ended (the earlier of its cancellation and the elector's
	// step-down), zero while it runs. Together they bound the time the
	// replica could believe it led.
	Sent, End time.Time
	// Acquired is the BecameLeaderEvent's timestamp; Ready the moment the
	// term became ready (zero if it never did) and ReadyLatency the runtime's
	// measure of Ready - Acquired.
	Acquired, Ready time.Time
	ReadyLatency    time.Duration
	// LostReason is the LostLeadershipEvent's reason, "" before it.
	LostReason string
	// TakeoverFrom is the previous holder seen by the acquiring write, "" if
	// the lease was released or new; TakeoverKnown says a takeover was seen.
	TakeoverFrom  string
	TakeoverKnown bool
	// FirstRender is the term's first TemplateRenderedEvent, at RenderAt.
	FirstRender *events.TemplateRenderedEvent
	RenderAt    time.Time
	// FirstPublish is the object after the term's first successful write.
	FirstPublish *configpublisher.Published
	PublishAt    time.Time
	// Replays are the moments the term's replayers ran.
	Replays []time.Time
}

// Mark is a moment of the run worth drawing.
type Mark struct {
	At      time.Time
	Kind    string // one of the Mark... constants
	Replica string // "" for the world
	Term    uint64
	Text    string
}

// Mark kinds.
const (
	MarkKill     = "kill"
	MarkCrash    = "crash"
	MarkPause    = "pause"
	MarkResume   = "resume"
	MarkRelease  = "release"
	MarkStall    = "stall"  // a replica leads without a leader-only component
	MarkReport   = "report" // the kubelet reported a container terminated
	MarkRestart  = "restart"
	MarkConfig   = "config"
	MarkInvalid  = "invalid"
	MarkPods     = "pods"
	MarkFailed   = "component-failed"
	MarkDeployed = "deployed"
)

// incarnation is one start of one replica, as the recorder keeps it.
type incarnation struct {
	replica string
	n       int
	writes  map[string]time.Time // sent time by resourceVersion of its own writes
	starts  []uint64             // terms, in the order the elector started them
	stops   []time.Time          // step-downs, in order: stops[k] ends starts[k]
	killed  atomic.Bool          // set before the incarnation is killed
}

// recorder collects what the replicas report. Its methods are called from
// the replicas' goroutines.
type recorder struct {
	log func(format string, args ...any)

	// mu guards the fields below.
	mu      sync.Mutex
	terms   map[uint64]*TermRecord
	ctxEnds map[uint64]time.Time // when each term's context ended
	marks   []Mark
	dropped uint64
	// announced holds the terms whose "became leader" line was logged.
	announced map[uint64]bool
}

func newRecorder(log func(string, ...any)) *recorder {
	return &recorder{log: log, terms: map[uint64]*TermRecord{}, ctxEnds: map[uint64]time.Time{}, announced: map[uint64]bool{}}
}

// termLocked returns the record of term, creating it.
func (r *recorder) termLocked(term uint64, inc *incarnation) *TermRecord {
	t := r.terms[term]
	if t == nil {
		t = &TermRecord{Term: term, Replica: inc.replica, Incarnation: inc.n}
		r.terms[term] = t
	}
	return t
}

// announce logs that inc became leader of term, once per term, whichever
// comes first: the BecameLeaderEvent on the observer's subscription, or a
// hook of the term's runtime (a replay, term-ready, a publish), which runs
// on goroutines of its own and may come before the observer got the event.
// Why log under mu: the line must be queued before the line of the hook
// that calls announce, and before another goroutine's line of the term;
// r.log never blocks (it queues or drops), so holding mu across it is safe.
func (r *recorder) announce(inc *incarnation, term uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if term == 0 || r.announced[term] {
		return
	}
	r.announced[term] = true
	r.log("%s became leader (term %d)", inc.replica, term)
}

func (r *recorder) mark(m Mark) {
	r.mu.Lock()
	r.marks = append(r.marks, m)
	r.mu.Unlock()
}

func (r *recorder) wrote(inc *incarnation, rv string, sent time.Time) {
	r.mu.Lock()
	inc.writes[rv] = sent
	r.mu.Unlock()
}

// lastWrite returns when inc's last write to the lease that succeeded was
// sent (its last renew, once it led), zero if none is known.
func (r *recorder) lastWrite(inc *incarnation) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last time.Time
	for _, sent := range inc.writes {
		if sent.After(last) {
			last = sent
		}
	}
	return last
}

// startedLeading runs in the elector's goroutine of the term.
func (r *recorder) startedLeading(inc *incarnation, ctx context.Context) {
	term, ok := termctx.FromContext(ctx)
	if !ok {
		return
	}
	r.mu.Lock()
	inc.starts = append(inc.starts, term)
	t := r.termLocked(term, inc)
	key := fmt.Sprint(term)
	t.Sent = inc.writes[key]
	// Renews are numbered after the term; drop the log up to it.
	for rv := range inc.writes {
		if olderOrEqual(rv, key) {
			delete(inc.writes, rv)
		}
	}
	r.mu.Unlock()
	context.AfterFunc(ctx, func() {
		now := time.Now()
		r.mu.Lock()
		r.ctxEnds[term] = now
		r.mu.Unlock()
	})
}

func olderOrEqual(a, b string) bool {
	return len(a) < len(b) || (len(a) == len(b) && a <= b)
}

// stoppedLeading runs on the election goroutine once per term, in order.
func (r *recorder) stoppedLeading(inc *incarnation) {
	now := time.Now()
	r.mu.Lock()
	inc.stops = append(inc.stops, now)
	r.mu.Unlock()
}

func (r *recorder) takeover(inc *incarnation, prev, acquired k8sle.LeaseRecord) {
	var term uint64
	if _, err := fmt.Sscan(acquired.ResourceVersion, &term); err != nil {
		return
	}
	r.mu.Lock()
	t := r.termLocked(term, inc)
	t.TakeoverFrom, t.TakeoverKnown = prev.HolderIdentity, true
	// The acquiring write's send, as startedLeading records it too: a run cut short
	// between this hook and the term's start still orders the term by its write,
	// not first (an unknown send sorted before every term, and the checks read it
	// as two leaders at once).
	if t.Sent.IsZero() {
		t.Sent = inc.writes[acquired.ResourceVersion]
	}
	r.mu.Unlock()
}

func (r *recorder) replayed(inc *incarnation, term uint64, name string, ok bool) {
	now := time.Now()
	r.mu.Lock()
	if term != 0 {
		t := r.termLocked(term, inc)
		t.Replays = append(t.Replays, now)
	}
	r.mu.Unlock()
	r.announce(inc, term)
	if ok {
		r.log("%s replayed its %s state to its leader-only components (term %d)", inc.replica, name, term)
	} else {
		r.log("%s had no %s state to replay (term %d)", inc.replica, name, term)
	}
}

func (r *recorder) termReady(inc *incarnation, rep lifecycle.TermReport) {
	r.mu.Lock()
	t := r.termLocked(rep.Term, inc)
	t.Ready, t.ReadyLatency = rep.Ready, rep.Latency
	r.mu.Unlock()
	r.announce(inc, rep.Term)
	r.log("%s term %d ready: every leader-only component holds its state, %v after the lease was acquired",
		inc.replica, rep.Term, rep.Latency)
}

func (r *recorder) published(inc *incarnation, rep configpublisher.WriteReport) {
	switch {
	case errors.Is(rep.Err, configpublisher.ErrStaleTerm):
		r.log("%s publisher fenced off (term %d): %v", inc.replica, rep.Term, rep.Err)
		return
	case rep.Err != nil || rep.Unchanged:
		return
	}
	now := time.Now()
	p := rep.Published
	r.mu.Lock()
	t := r.termLocked(rep.Term, inc)
	first := t.FirstPublish == nil
	if first {
		t.FirstPublish, t.PublishAt = &p, now
	}
	r.mu.Unlock()
	r.announce(inc, rep.Term)
	status := string(p.Status)
	if len(p.Reasons) > 0 {
		status += " (" + strings.Join(p.Reasons, "; ") + ")"
	}
	r.log("%s published (term %d): config %s, pods generation %d, %s", inc.replica, rep.Term, short(p.ConfigVersion), p.PodGeneration, status)
}

// observe takes an event from a replica's bus.
func (r *recorder) observe(inc *incarnation, ev busevents.Event) {
	switch e := ev.(type) {
	case *events.BecameLeaderEvent:
		r.mu.Lock()
		r.termLocked(e.Term, inc).Acquired = e.Timestamp()
		r.mu.Unlock()
		r.announce(inc, e.Term)
	case *events.LostLeadershipEvent:
		r.mu.Lock()
		r.termLocked(e.Term, inc).LostReason = e.Reason
		r.mu.Unlock()
		r.log("%s lost leadership (term %d): %s", inc.replica, e.Term, e.Reason)
	case *events.TemplateRenderedEvent:
		r.mu.Lock()
		t := r.termLocked(e.Term, inc)
		first := t.FirstRender == nil
		if first {
			t.FirstRender, t.RenderAt = e, e.Timestamp()
		}
		r.mu.Unlock()
		if first {
			r.log("%s first render of term %d, from config %s and pods generation %d: %s",
				inc.replica, e.Term, short(e.ConfigVersion), e.PodGeneration, renderSummary(e.Output))
		}
	case *events.ValidationFailedEvent:
		first := ""
		if len(e.Errors) > 0 {
			first = e.Errors[0].Error()
		}
		r.log("%s render of term %d failed validation: %s", inc.replica, e.Term, first)
	case *events.DeploymentScheduledEvent:
		r.mark(Mark{At: e.Timestamp(), Kind: MarkDeployed, Replica: inc.replica, Term: e.Term,
			Text: fmt.Sprintf("deployment #%d", e.Sequence)})
	case *events.ComponentFailedEvent:
		if inc.killed.Load() {
			r.log("%s component %s failed, as expected of a killed replica: %v", inc.replica, e.Component, e.Err)
			return
		}
		r.mark(Mark{At: e.Timestamp(), Kind: MarkFailed, Replica: inc.replica, Term: e.Term, Text: e.Component})
		r.log("%s component %s failed (term %d): %v", inc.replica, e.Component, e.Term, e.Err)
	}
}

// observed are the event types the observers subscribe to.
var observed = []string{
	events.EventTypeBecameLeader, events.EventTypeLostLeadership, events.EventTypeTemplateRendered,
	events.EventTypeValidationFailed, events.EventTypeDeploymentScheduled, events.EventTypeComponentFailed,
}

func (r *recorder) drop() {
	r.mu.Lock()
	r.dropped++
	r.mu.Unlock()
}

// term returns a copy of a term's record, with its End as known now.
func (r *recorder) term(term uint64, incs []*incarnation) (TermRecord, bool) {
	for _, t := range r.snapshot(incs) {
		if t.Term == term {
			return t, true
		}
	}
	return TermRecord{}, false
}

// snapshot returns copies of the term records, sorted by the time their
// acquisition was sent, with each End the earlier of the context's end and
// the matching step-down.
func (r *recorder) snapshot(incs []*incarnation) []TermRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	stops := map[uint64]time.Time{}
	for _, inc := range incs {
		for k, term := range inc.starts {
			if k < len(inc.stops) {
				stops[term] = inc.stops[k]
			}
		}
	}
	out := make([]TermRecord, 0, len(r.terms))
	for _, t := range r.terms {
		c := *t
		c.Replays = slices.Clone(t.Replays)
		c.End = earliest(r.ctxEnds[t.Term], stops[t.Term])
		if c.Sent.IsZero() {
			c.Sent = c.Acquired
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b TermRecord) int { return cmp.Or(a.Sent.Compare(b.Sent), cmp.Compare(a.Term, b.Term)) })
	return out
}

func (r *recorder) allMarks() []Mark {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.marks)
	slices.SortStableFunc(out, func(a, b Mark) int { return a.At.Compare(b.At) })
	return out
}

func (r *recorder) droppedEvents() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// earliest returns the earlier of two times, ignoring zero ones.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// renderSummary picks out of a rendered configuration what the demo
// changes: the global maxconn and the server lines.
func renderSummary(out string) string {
	var maxConn string
	var servers []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "maxconn" && maxConn == "":
			maxConn = f[1]
		case len(f) >= 3 && f[0] == "server":
			servers = append(servers, strings.TrimPrefix(f[1], podNamespace+".")+" "+f[2])
		}
	}
	return fmt.Sprintf("maxconn %s; %s: %s", maxConn, count(len(servers), "server"), strings.Join(servers, ", "))
}

// short abbreviates a configuration version for display.
func short(v string) string {
	if len(v) > 8 {
		return v[:8]
	}
	return v
}
