package election

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// spanKey names one leadership: a candidate and one of its terms (Baton) or runs
// (client-go).
type spanKey struct {
	who, episode string
}

// span is what the monitor knows of one leadership. The belief certainly held
// over [from, to]: from is the after-stamp of the first observation of it, to the
// before-stamp of the last. With one observation only, from > to: the belief held
// at some instant in [to, from].
type span struct {
	spanKey
	term uint64 // Baton term; 0 for client-go
	from mtime  // 0 until observed
	to   mtime
	// endAt is the after-stamp of the first observation that the leadership ended,
	// 0 while none.
	endAt mtime
}

func (s *span) String() string {
	return fmt.Sprintf("%s %s [%d, %d]", s.who, s.episode, s.from, s.to)
}

// monitor collects leadership observations of all candidates of a test and
// checks that no two leaderships were believed at once, and that terms grow.
type monitor struct {
	// mu guards the fields below.
	mu       sync.Mutex
	spans    map[spanKey]*span
	problems []string
}

func newMonitor() *monitor {
	return &monitor{spans: map[spanKey]*span{}}
}

func episodeOfTerm(term uint64) string { return fmt.Sprintf("term %d", term) }

// leading records that who believed it led in episode during some instant of
// [b, a] (b and a stamped before and after the observation). Either bound may be 0
// when unknown.
func (m *monitor) leading(who, episode string, term uint64, b, a mtime) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := spanKey{who, episode}
	s := m.spans[k]
	if s == nil {
		s = &span{spanKey: k, term: term}
		m.spans[k] = s
	}
	if s.endAt != 0 && b > s.endAt {
		m.problems = append(m.problems, fmt.Sprintf("%s believed it led in %s again after that ended (observed at %d, ended by %d)",
			who, episode, b, s.endAt))
	}
	if a != 0 && (s.from == 0 || a < s.from) {
		s.from = a
	}
	if b > s.to {
		s.to = b
	}
}

// ended records that who's leadership episode was over by a.
func (m *monitor) ended(who, episode string, a mtime) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.spans[spanKey{who, episode}]; s != nil && (s.endAt == 0 || a < s.endAt) {
		s.endAt = a
	}
}

// problem records a violation found elsewhere (by a sampler or a subprocess).
func (m *monitor) problem(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.problems = append(m.problems, fmt.Sprintf(format, args...))
}

// snapshot returns copies of the spans, sorted by from.
func (m *monitor) snapshot() []span {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]span, 0, len(m.spans))
	for _, s := range m.spans {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	return out
}

// violations returns every proven violation so far.
func (m *monitor) violations() []string {
	m.mu.Lock()
	out := slices.Clone(m.problems)
	m.mu.Unlock()
	spans := m.snapshot()
	for i := range spans {
		for j := i + 1; j < len(spans); j++ {
			x, y := &spans[i], &spans[j]
			if x.from == 0 || y.from == 0 {
				continue
			}
			// Proven overlap: x held at some instant ≥ x.to and ≤ x.from, y over
			// [y.from, y.to] or likewise; the strict test below never fires for two
			// single observations.
			if y.from < x.to && x.from < y.to {
				out = append(out, fmt.Sprintf("overlapping leaderships: %s and %s (overlap %v)",
					x, y, min(x.to, y.to).sub(max(x.from, y.from))))
			}
			if x.term != 0 && y.term != 0 && x.term == y.term {
				out = append(out, fmt.Sprintf("term %d held twice: %s and %s", x.term, x, y))
			}
		}
	}
	// Terms grow in the order they are held: a larger term never certainly held
	// before the last certain moment of a smaller one.
	var baton []span
	for _, s := range spans {
		if s.term != 0 && s.from != 0 {
			baton = append(baton, s)
		}
	}
	slices.SortFunc(baton, func(a, b span) int { return cmp.Compare(a.term, b.term) })
	for i := range baton {
		for j := i + 1; j < len(baton); j++ {
			small, large := &baton[i], &baton[j]
			overlap := large.from < small.to && small.from < large.to // reported above
			if large.from < small.to && !overlap {
				out = append(out, fmt.Sprintf("term %d (%s) was held before term %d (%s) ended", large.term, large, small.term, small))
			}
		}
	}
	return out
}

// check fails t with every violation.
func (m *monitor) check(t testing.TB) {
	t.Helper()
	for _, v := range m.violations() {
		t.Errorf("safety: %s", v)
	}
	if t.Failed() {
		for _, s := range m.snapshot() {
			t.Logf("span %s ended by %d", &s, s.endAt)
		}
	}
}

// candidate is an in-process elector the sampler observes.
type candidate interface {
	// sample observes the candidate once and reports to m.
	sample(m *monitor)
}

// sampler observes candidates in a loop until stopped.
type sampler struct {
	m      *monitor
	cancel context.CancelFunc
	done   chan struct{}

	// mu guards cands.
	mu    sync.Mutex
	cands []candidate
}

func startSampler(m *monitor) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{m: m, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			s.mu.Lock()
			cands := slices.Clone(s.cands)
			s.mu.Unlock()
			for _, c := range cands {
				c.sample(m)
			}
			time.Sleep(500 * time.Microsecond)
		}
	}()
	return s
}

func (s *sampler) add(c candidate) {
	s.mu.Lock()
	s.cands = append(s.cands, c)
	s.mu.Unlock()
}

// stop ends the loop and waits for it.
func (s *sampler) stop() {
	s.cancel()
	<-s.done
}

// TestMonitorProvesOnlyRealOverlaps checks the monitor's reasoning on made-up
// observations: it flags proven overlaps, resumed terms and out-of-order terms, and
// never two observations whose order is unknown.
func TestMonitorProvesOnlyRealOverlaps(t *testing.T) {
	cases := []struct {
		name string
		obs  func(m *monitor)
		want int // violations
	}{
		{"one leader", func(m *monitor) {
			m.leading("a", "term 10", 10, 100, 101)
			m.leading("a", "term 10", 10, 200, 201)
		}, 0},
		{"sequential leaders", func(m *monitor) {
			m.leading("a", "term 10", 10, 100, 101)
			m.leading("a", "term 10", 10, 200, 201)
			m.ended("a", "term 10", 210)
			m.leading("b", "term 20", 20, 300, 301)
			m.leading("b", "term 20", 20, 400, 401)
		}, 0},
		{"overlapping intervals", func(m *monitor) {
			m.leading("a", "term 10", 10, 100, 101)
			m.leading("a", "term 10", 10, 300, 301)
			m.leading("b", "term 20", 20, 200, 201)
			m.leading("b", "term 20", 20, 400, 401)
		}, 1},
		{"single look inside another's interval", func(m *monitor) {
			m.leading("a", "term 10", 10, 100, 101)
			m.leading("a", "term 10", 10, 300, 301)
			m.leading("b", "run 1", 0, 200, 201)
		}, 1},
		{"two single looks prove nothing", func(m *monitor) {
			m.leading("a", "term 10", 10, 100, 300)
			m.leading("b", "term 20", 20, 200, 400)
		}, 0},
		{"term believed again after it ended", func(m *monitor) {
			m.leading("a", "term 10", 10, 100, 101)
			m.ended("a", "term 10", 150)
			m.leading("a", "term 10", 10, 200, 201)
		}, 1},
		{"larger term held first", func(m *monitor) {
			m.leading("b", "term 20", 20, 100, 101)
			m.leading("b", "term 20", 20, 110, 111)
			m.leading("a", "term 10", 10, 300, 301)
			m.leading("a", "term 10", 10, 310, 311)
		}, 1},
		{"same term twice", func(m *monitor) {
			m.leading("a", "term 10", 10, 100, 101)
			m.leading("b", "term 10", 10, 300, 301)
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMonitor()
			tc.obs(m)
			if got := m.violations(); len(got) != tc.want {
				t.Errorf("violations = %q, want %d", got, tc.want)
			}
		})
	}
}
