package configpublisher_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

func newMemory(t testing.TB) *store.Memory {
	m, err := store.NewMemory("published")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func valid(term uint64, version string, gen uint64) configpublisher.Record {
	return configpublisher.Record{
		Term:    term,
		Status:  configpublisher.StatusValid,
		Content: &configpublisher.Payload{Data: map[string]string{"config.yaml": "v: " + version}, ConfigVersion: version, PodGeneration: gen},
	}
}

func decode(t *testing.T, s store.Store) configpublisher.Published {
	t.Helper()
	o, err := s.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := configpublisher.Decode(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWriteCreatesAndRecords(t *testing.T) {
	s := newMemory(t)
	rec := valid(5, "abc", 3)
	rec.Identity = "replica-1"
	res, err := configpublisher.Write(t.Context(), s, rec)
	if err != nil || !res.Created || res.Unchanged {
		t.Fatalf("Write = %+v, %v", res, err)
	}
	p := decode(t, s)
	if p.Term != 5 || p.ConfigVersion != "abc" || p.PodGeneration != 3 || p.Status != configpublisher.StatusValid ||
		p.PublishedBy != "replica-1" || p.Data["config.yaml"] != "v: abc" || len(p.Reasons) != 0 {
		t.Errorf("published %+v", p)
	}
	if res.Object.Labels[configpublisher.LabelManagedBy] != configpublisher.ManagedBy {
		t.Errorf("labels %v", res.Object.Labels)
	}
	// The same record again writes nothing.
	before := s.Writes()
	res, err = configpublisher.Write(t.Context(), s, rec)
	if err != nil || !res.Unchanged || s.Writes() != before {
		t.Errorf("rewrite of the same record: %+v, %v, writes %d -> %d", res, err, before, s.Writes())
	}
}

func TestWriteFencesOlderTerms(t *testing.T) {
	s := newMemory(t)
	if _, err := configpublisher.Write(t.Context(), s, valid(10, "new", 1)); err != nil {
		t.Fatal(err)
	}
	_, err := configpublisher.Write(t.Context(), s, valid(9, "old", 1))
	if !errors.Is(err, configpublisher.ErrStaleTerm) {
		t.Fatalf("write with an older term = %v, want ErrStaleTerm", err)
	}
	if !strings.Contains(err.Error(), "carries term 10, the writer's term is 9") {
		t.Errorf("message %q does not say both terms", err)
	}
	if p := decode(t, s); p.Term != 10 || p.ConfigVersion != "new" {
		t.Errorf("refused write changed the object: %+v", p)
	}
	// The same term and a newer one may write.
	if _, err := configpublisher.Write(t.Context(), s, valid(10, "new2", 2)); err != nil {
		t.Errorf("same term: %v", err)
	}
	if _, err := configpublisher.Write(t.Context(), s, valid(11, "newer", 2)); err != nil {
		t.Errorf("newer term: %v", err)
	}
	if p := decode(t, s); p.Term != 11 || p.ConfigVersion != "newer" {
		t.Errorf("published %+v", p)
	}
}

func TestStatusOnlyWriteKeepsContent(t *testing.T) {
	s := newMemory(t)
	configpublisher.Write(t.Context(), s, valid(3, "good", 4))
	inv := configpublisher.Record{Term: 3, Status: configpublisher.StatusInvalid,
		Reasons: []string{"backends[0].port: must be between 1 and 65535"}, InvalidVersion: "raw-1"}
	if _, err := configpublisher.Write(t.Context(), s, inv); err != nil {
		t.Fatal(err)
	}
	p := decode(t, s)
	if p.Status != configpublisher.StatusInvalid || p.ConfigVersion != "good" || p.PodGeneration != 4 ||
		p.Data["config.yaml"] != "v: good" || p.InvalidVersion != "raw-1" ||
		!slices.Equal(p.Reasons, inv.Reasons) {
		t.Errorf("after invalid: %+v", p)
	}
	configpublisher.Write(t.Context(), s, valid(3, "fixed", 4))
	p = decode(t, s)
	if p.Status != configpublisher.StatusValid || p.Reasons != nil || p.InvalidVersion != "" || p.ConfigVersion != "fixed" {
		t.Errorf("after valid again: %+v", p)
	}
}

func TestWriteKeepsForeignMetadata(t *testing.T) {
	s := newMemory(t)
	s.Set(store.Object{Labels: map[string]string{"team": "lb"}, Annotations: map[string]string{"note": "hands off"}})
	configpublisher.Write(t.Context(), s, valid(1, "a", 1))
	o, _ := s.Get(t.Context())
	if o.Labels["team"] != "lb" || o.Annotations["note"] != "hands off" {
		t.Errorf("foreign metadata lost: %+v", o)
	}
}

// racer is a store whose Update first lets another writer change the object,
// once: the write under test then loses the compare-and-swap.
type racer struct {
	*store.Memory
	other func(m *store.Memory)
}

func (r *racer) Update(ctx context.Context, o store.Object) (store.Object, error) {
	if r.other != nil {
		r.other(r.Memory)
		r.other = nil
	}
	return r.Memory.Update(ctx, o)
}

func TestWriteRetriesConflicts(t *testing.T) {
	m := newMemory(t)
	configpublisher.Write(t.Context(), m, valid(4, "a", 1))
	r := &racer{Memory: m, other: func(m *store.Memory) {
		o, _ := m.Get(context.Background())
		o = o.Clone() // read-only: change a copy
		o.Annotations["touched"] = "yes"
		m.Set(o)
	}}
	res, err := configpublisher.Write(t.Context(), r, valid(4, "b", 2))
	if err != nil || res.Conflicts != 1 {
		t.Fatalf("Write = %+v, %v; want success after 1 conflict", res, err)
	}
	o, _ := m.Get(t.Context())
	if o.Annotations["touched"] != "yes" || o.Annotations[configpublisher.AnnotationConfigVersion] != "b" {
		t.Errorf("after retry: %+v", o.Annotations)
	}
}

// TestRaceWithNewerLeader: the older leader read the object, then the newer
// leader wrote; the older leader's compare-and-swap fails, it reads again,
// and the fence refuses it.
func TestRaceWithNewerLeader(t *testing.T) {
	m := newMemory(t)
	configpublisher.Write(t.Context(), m, valid(4, "a", 1))
	r := &racer{Memory: m, other: func(m *store.Memory) {
		if _, err := configpublisher.Write(context.Background(), m, valid(5, "from-5", 1)); err != nil {
			t.Error(err)
		}
	}}
	res, err := configpublisher.Write(t.Context(), r, valid(4, "late-4", 2))
	if !errors.Is(err, configpublisher.ErrStaleTerm) || res.Conflicts != 1 {
		t.Fatalf("Write = %+v, %v; want ErrStaleTerm after 1 conflict", res, err)
	}
	if p := decode(t, m); p.Term != 5 || p.ConfigVersion != "from-5" {
		t.Errorf("the older term's write landed: %+v", p)
	}
}

// conflicting always loses the compare-and-swap.
type conflicting struct{ *store.Memory }

func (c conflicting) Update(context.Context, store.Object) (store.Object, error) {
	return store.Object{}, store.ErrConflict
}

func TestWriteGivesUp(t *testing.T) {
	m := newMemory(t)
	configpublisher.Write(t.Context(), m, valid(1, "a", 1))
	res, err := configpublisher.Write(t.Context(), conflicting{m}, valid(1, "b", 1))
	if !errors.Is(err, configpublisher.ErrTooManyConflicts) || res.Conflicts != configpublisher.DefaultMaxAttempts {
		t.Errorf("Write = %+v, %v", res, err)
	}
}

func TestWriteChecks(t *testing.T) {
	m := newMemory(t)
	for _, tc := range []struct {
		name string
		rec  configpublisher.Record
		want string
	}{
		{"term", configpublisher.Record{Status: configpublisher.StatusValid}, "configpublisher: invalid record: term is 0"},
		{"status", configpublisher.Record{Term: 1, Status: "ok"}, `configpublisher: invalid record: status "ok" is neither "valid" nor "invalid"`},
		{"reasons", configpublisher.Record{Term: 1, Status: configpublisher.StatusInvalid}, "configpublisher: invalid record: status invalid without reasons"},
	} {
		_, err := configpublisher.Write(t.Context(), m, tc.rec)
		if !errors.Is(err, configpublisher.ErrBadRecord) || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	m.Set(store.Object{Annotations: map[string]string{configpublisher.AnnotationTerm: "seven"}})
	if _, err := configpublisher.Write(t.Context(), m, valid(1, "a", 1)); !errors.Is(err, configpublisher.ErrBadObject) {
		t.Errorf("unreadable term: %v, want ErrBadObject", err)
	}
	for _, a := range []map[string]string{
		{configpublisher.AnnotationPodGeneration: "-1"},
		{configpublisher.AnnotationReasons: "[1,"},
	} {
		if _, err := configpublisher.Decode(store.Object{Annotations: a}); !errors.Is(err, configpublisher.ErrBadObject) {
			t.Errorf("Decode(%v) = %v, want ErrBadObject", a, err)
		}
	}
}

// TestFencingOnConfigMap runs the fence against a real API server, where
// the resourceVersion check is the server's.
func TestFencingOnConfigMap(t *testing.T) {
	env := batontest.StartEnv(t)
	s, err := store.NewConfigMap(env.Clientset(), "default", "baton-published")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := configpublisher.Write(t.Context(), s, valid(20, "a", 1)); err != nil {
		t.Fatal(err)
	}
	other, _ := store.NewConfigMap(env.Clientset(), "default", "baton-published")
	if _, err := configpublisher.Write(t.Context(), other, valid(21, "b", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := configpublisher.Write(t.Context(), s, valid(20, "late", 2)); !errors.Is(err, configpublisher.ErrStaleTerm) {
		t.Fatalf("write with the old term = %v, want ErrStaleTerm", err)
	}
	if p := decode(t, s); p.Term != 21 || p.ConfigVersion != "b" {
		t.Errorf("published %+v", p)
	}
	// Racing writers from both terms: the newer one always ends on top.
	errs := make(chan error, 2)
	for _, rec := range []configpublisher.Record{valid(21, "c", 3), valid(20, "d", 3)} {
		go func() {
			var err error
			for range 5 {
				if _, err = configpublisher.Write(context.Background(), s, rec); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	var stale int
	for range 2 {
		if err := <-errs; errors.Is(err, configpublisher.ErrStaleTerm) {
			stale++
		} else if err != nil {
			t.Error(err)
		}
	}
	if p := decode(t, s); stale != 1 || p.Term != 21 || p.ConfigVersion != "c" {
		t.Errorf("after the race: %d refused, published %+v", stale, p)
	}
}

// TestWriteFencesOlderGenerations: content built from a pod generation
// below the one published is refused, in a newer term too (a new leader
// whose discovery lags); an equal or greater one, and a status-only write,
// pass.
func TestWriteFencesOlderGenerations(t *testing.T) {
	s := newMemory(t)
	if _, err := configpublisher.Write(t.Context(), s, valid(10, "v1", 7)); err != nil {
		t.Fatal(err)
	}
	_, err := configpublisher.Write(t.Context(), s, valid(11, "v1", 4))
	if !errors.Is(err, configpublisher.ErrStaleGeneration) || !strings.Contains(err.Error(), "records pod generation 7, this write's content is of generation 4") {
		t.Fatalf("write of generation 4 over 7 = %v, want ErrStaleGeneration naming both", err)
	}
	if p := decode(t, s); p.Term != 10 || p.PodGeneration != 7 {
		t.Errorf("refused write changed the object: %+v", p)
	}
	status := configpublisher.Record{Term: 11, Status: configpublisher.StatusInvalid, Reasons: []string{"bad"}}
	if _, err := configpublisher.Write(t.Context(), s, status); err != nil {
		t.Errorf("status-only write: %v", err)
	}
	for _, gen := range []uint64{7, 9} {
		if _, err := configpublisher.Write(t.Context(), s, valid(11, "v2", gen)); err != nil {
			t.Errorf("generation %d over 7: %v", gen, err)
		}
	}
	if p := decode(t, s); p.Term != 11 || p.PodGeneration != 9 {
		t.Errorf("published %+v", p)
	}
}

// TestWriteDetectsEveryChange checks Write's change detection, field by
// field: from a written record, a record that differs in any one thing the
// object records is written (and reads back as written), the same record
// again is not, and a Baton label or annotation another writer changed is
// restored.
func TestWriteDetectsEveryChange(t *testing.T) {
	base := func() configpublisher.Record {
		r := valid(5, "abc", 3)
		r.Identity = "replica-1"
		return r
	}
	invalid := func(r configpublisher.Record) configpublisher.Record {
		r.Status, r.Reasons, r.InvalidVersion = configpublisher.StatusInvalid, []string{"bad"}, "xyz"
		return r
	}
	cases := []struct {
		name   string
		first  configpublisher.Record
		change func(*configpublisher.Record)
		tamper func(*store.Object) // another writer's change between the two writes
		want   bool                // a write is made
	}{
		{name: "same", first: base(), change: func(*configpublisher.Record) {}},
		{name: "term", first: base(), change: func(r *configpublisher.Record) { r.Term = 6 }, want: true},
		{name: "identity changed", first: base(), change: func(r *configpublisher.Record) { r.Identity = "replica-2" }, want: true},
		{name: "identity cleared", first: base(), change: func(r *configpublisher.Record) { r.Identity = "" }, want: true},
		{name: "data", first: base(), change: func(r *configpublisher.Record) {
			r.Content = &configpublisher.Payload{Data: map[string]string{"config.yaml": "other"}, ConfigVersion: "abc", PodGeneration: 3}
		}, want: true},
		{name: "data key added", first: base(), change: func(r *configpublisher.Record) {
			r.Content = &configpublisher.Payload{Data: map[string]string{"config.yaml": "v: abc", "x": ""}, ConfigVersion: "abc", PodGeneration: 3}
		}, want: true},
		{name: "same data, new map", first: base(), change: func(r *configpublisher.Record) {
			r.Content = &configpublisher.Payload{Data: map[string]string{"config.yaml": "v: abc"}, ConfigVersion: "abc", PodGeneration: 3}
		}},
		{name: "config version", first: base(), change: func(r *configpublisher.Record) { r.Content.ConfigVersion = "abd" }, want: true},
		{name: "pod generation", first: base(), change: func(r *configpublisher.Record) { r.Content.PodGeneration = 4 }, want: true},
		{name: "status-only write keeps content", first: base(), change: func(r *configpublisher.Record) { r.Content = nil }},
		{name: "invalid", first: base(), change: func(r *configpublisher.Record) { *r = invalid(*r) }, want: true},
		{name: "reasons", first: invalid(base()), change: func(r *configpublisher.Record) { r.Reasons = []string{"worse"} }, want: true},
		{name: "invalid version", first: invalid(base()), change: func(r *configpublisher.Record) { r.InvalidVersion = "xyw" }, want: true},
		{name: "valid again", first: invalid(base()), change: func(r *configpublisher.Record) { *r = base() }, want: true},
		{name: "label tampered", first: base(), change: func(*configpublisher.Record) {},
			tamper: func(o *store.Object) { delete(o.Labels, configpublisher.LabelManagedBy) }, want: true},
		{name: "status tampered", first: base(), change: func(*configpublisher.Record) {},
			tamper: func(o *store.Object) { o.Annotations[configpublisher.AnnotationStatus] = "x" }, want: true},
		{name: "foreign annotation", first: base(), change: func(*configpublisher.Record) {},
			tamper: func(o *store.Object) { o.Annotations["other"] = "x" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newMemory(t)
			if _, err := configpublisher.Write(t.Context(), s, tc.first); err != nil {
				t.Fatal(err)
			}
			if tc.tamper != nil {
				o, err := s.Get(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				o = o.Clone() // read-only: change a copy
				tc.tamper(&o)
				s.Set(o)
			}
			rec := tc.first
			if rec.Content != nil {
				c := *rec.Content
				rec.Content = &c
			}
			tc.change(&rec)
			before := s.Writes()
			res, err := configpublisher.Write(t.Context(), s, rec)
			if err != nil {
				t.Fatal(err)
			}
			if wrote := s.Writes() != before; wrote != tc.want || res.Unchanged == tc.want {
				t.Fatalf("wrote %v (Unchanged %v), want a write: %v", wrote, res.Unchanged, tc.want)
			}
			p := decode(t, s)
			want := rec
			if want.Content == nil {
				want.Content = tc.first.Content
			}
			if p.Term != want.Term || p.PublishedBy != want.Identity || p.Status != want.Status ||
				!slices.Equal(p.Reasons, want.Reasons) || p.InvalidVersion != want.InvalidVersion ||
				p.ConfigVersion != want.Content.ConfigVersion || p.PodGeneration != want.Content.PodGeneration ||
				len(p.Data) != len(want.Content.Data) || p.Data["config.yaml"] != want.Content.Data["config.yaml"] {
				t.Errorf("published %+v, want %+v", p, want)
			}
			if o, _ := s.Get(t.Context()); o.Labels[configpublisher.LabelManagedBy] != configpublisher.ManagedBy {
				t.Errorf("labels %v", o.Labels)
			}
		})
	}
}

// TestWriteSharesNothingWithTheRecord checks, for a create, an update and
// an unchanged write, that Write never changes a map of the object it read
// (read-only: the store shares it) and that the object written shares no
// map with the record, which stays the caller's.
func TestWriteSharesNothingWithTheRecord(t *testing.T) {
	s := newMemory(t)
	for i, rec := range []configpublisher.Record{valid(1, "a", 1), valid(2, "b", 2), valid(2, "b", 2)} {
		read, _ := s.Get(t.Context()) // absent before the first write
		snapshot := read.Clone()
		res, err := configpublisher.Write(t.Context(), s, rec)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(read.Labels, snapshot.Labels) || !maps.Equal(read.Annotations, snapshot.Annotations) ||
			!maps.Equal(read.Data, snapshot.Data) {
			t.Fatalf("write %d changed the object it read: %+v, was %+v", i, read, snapshot)
		}
		want := rec.Content.Data["config.yaml"]
		rec.Content.Data["config.yaml"] = "changed by the caller"
		if p := decode(t, s); p.Data["config.yaml"] != want || p.Term != rec.Term {
			t.Fatalf("write %d: the stored object shares its data with the record: %+v", i, p)
		}
		if res.Object.Data["config.yaml"] != want {
			t.Fatalf("write %d: the result shares its data with the record: %v", i, res.Object.Data)
		}
	}
}

// TestWriteAllocations guards the cost of the write a new term makes when
// only the term changed, on a large rendered content: the read copies
// nothing, the data and labels are passed on as they are, and only the
// annotations (one map), the term and the resourceVersion are new.
func TestWriteAllocations(t *testing.T) {
	s := newMemory(t)
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "server s%d 10.0.0.%d:80\n", i, i%250)
	}
	rec := valid(1000, "v", 700) // terms and generations of more than two digits: strconv keeps the small ones
	rec.Content.Data = map[string]string{configpublisher.KeyRendered: b.String()}
	if _, err := configpublisher.Write(t.Context(), s, rec); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		rec.Term++
		res, err := configpublisher.Write(t.Context(), s, rec)
		if err != nil || res.Unchanged {
			t.Fatalf("write of term %d: unchanged %v, %v", rec.Term, res.Unchanged, err)
		}
	})
	t.Logf("%.1f allocations per term-only write", n)
	if n > 3 {
		t.Errorf("a write that changes only the term costs %.1f allocations, want at most 3 (annotations map, term, resourceVersion)", n)
	}
}

// TestWriteHoldingReplacesAStampOfNoTerm: an object stamped with a term above every
// term of the Lease (2^64-1, or the leader's term + 1) is rewritten by the leader that
// still holds the Lease in its term, once the Lease was read; a replica that no longer
// holds it is refused as before, and so is every write without the check.
func TestWriteHoldingReplacesAStampOfNoTerm(t *testing.T) {
	for _, stamp := range []uint64{math.MaxUint64, 8} {
		s := newMemory(t)
		if _, err := configpublisher.Write(t.Context(), s, valid(stamp, "foreign", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := configpublisher.Write(t.Context(), s, valid(7, "ours", 1)); !errors.Is(err, configpublisher.ErrStaleTerm) {
			t.Fatalf("stamp %d: Write without the Lease check: %v, want ErrStaleTerm", stamp, err)
		}
		reads := 0
		notHolding := func(context.Context, uint64) (bool, error) { reads++; return false, nil }
		if _, err := configpublisher.WriteHolding(t.Context(), s, valid(7, "ours", 1), notHolding); !errors.Is(err, configpublisher.ErrStaleTerm) {
			t.Fatalf("stamp %d: a replica that no longer holds the Lease: %v, want ErrStaleTerm", stamp, err)
		}
		holding := func(_ context.Context, term uint64) (bool, error) { reads++; return term == 7, nil }
		res, err := configpublisher.WriteHolding(t.Context(), s, valid(7, "ours", 1), holding)
		if err != nil || res.NoTermStamp != stamp {
			t.Fatalf("stamp %d: the holder's write: %+v, %v, want it written, replacing stamp %d", stamp, res, err, stamp)
		}
		if reads != 2 {
			t.Errorf("stamp %d: the Lease was read %d times, want once per write", stamp, reads)
		}
		if p := decode(t, s); p.Term != 7 || p.ConfigVersion != "ours" {
			t.Errorf("stamp %d: published %+v, want term 7's", stamp, p)
		}
		failing := func(context.Context, uint64) (bool, error) { return false, errors.New("unreachable") }
		if _, err := configpublisher.Write(t.Context(), s, valid(stamp, "foreign", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := configpublisher.WriteHolding(t.Context(), s, valid(7, "ours", 2), failing); err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Errorf("stamp %d: with the Lease unreadable: %v, want its error", stamp, err)
		}
	}
}
