package chaos

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// synthetic builds a history by hand: terms, fenced writes and the two probes of a
// settled single leader c0#0 in term 5.
func synthetic(terms []*termRec, ops []regOp) *history {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	h := &history{
		seed: 1, test: "TestSynthetic", begin: t0, healAt: at(100), checkAt: at(119), bound: 19 * time.Second,
		cfg: configs[0], n: 2, count: newCounters(), reg: &register{ops: ops}, logs: &syncBuffer{},
		terms: terms,
	}
	views := map[string]string{"c0": "c0", "c1": "c0"}
	h.probes = []probe{
		{at: at(119), leaders: []string{"c0#0"}, terms: map[string]uint64{"c0#0": 5}, views: views},
		{at: at(134), leaders: []string{"c0#0"}, terms: map[string]uint64{"c0#0": 5}, views: views},
	}
	return h
}

func sec(s float64) time.Time {
	return time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(s * float64(time.Second)))
}

func kinds(r *result) []string {
	var out []string
	for _, v := range r.violations {
		if !slices.Contains(out, v.kind) {
			out = append(out, v.kind)
		}
	}
	slices.Sort(out)
	return out
}

// TestCheckerFindsViolations feeds the checker histories with one known fault each and
// a clean one: it must name exactly the broken properties.
func TestCheckerFindsViolations(t *testing.T) {
	term := func(who string, n uint64, from, to float64) *termRec { // a candidate that saw the lease before
		return &termRec{who: who, id: who[:2], term: n, start: sec(from), end: sec(to), firstSaw: sec(-1)}
	}
	cold := func(who string, n uint64, sent, saw, from, to float64) *termRec { // saw the lease at saw
		return &termRec{who: who, id: who[:2], term: n, sent: sec(sent), start: sec(from), end: sec(to), firstSaw: sec(saw)}
	}
	overtaken := []startedTerm{{who: "c1#0", term: 2, known: true, write: writeRec{sent: sec(1), answered: sec(2), delivered: 3}}}
	answered := []startedTerm{{who: "c1#0", term: 2, known: true, write: writeRec{sent: sec(1), answered: sec(2), delivered: 2}}}
	write := func(who string, n uint64, at float64, ok bool) regOp {
		return regOp{who: who, term: n, call: sec(at), ret: sec(at + 0.01), accepted: ok}
	}
	settled := term("c0#0", 5, 90, 150)
	started := map[string][]startedTerm{ // the terms started, with their writes, where it matters
		"a lower term answered late inside a cold start's term is the fenced window": answered,
		"a term started on an overtaken write":                                       overtaken,
		"a lower term answered late inside a term that saw the lease":                answered,
	}
	tests := []struct {
		name  string
		terms []*termRec
		ops   []regOp
		want  []string
	}{
		{"clean", []*termRec{term("c1#0", 2, 0, 10), term("c1#0", 3, 10, 20), settled},
			[]regOp{write("c1#0", 2, 5, true), write("c1#0", 3, 15, true), write("c1#0", 2, 16, false), write("c0#0", 5, 120, true)}, nil},
		{"back to back is no overlap", []*termRec{term("c1#0", 2, 0, 10), term("c2#0", 3, 10, 20), settled}, nil, nil},
		{"overlap", []*termRec{term("c1#0", 2, 0, 10), term("c2#0", 3, 9.999, 20), settled}, nil, []string{vOverlap}},
		{"cold start inside an old term is the fenced window", []*termRec{term("c1#0", 2, 0, 10),
			{who: "c2#0", id: "c2", term: 3, start: sec(5), end: sec(20)}, settled}, nil, nil},
		{"a later term of the cold-started candidate stays in the window", []*termRec{term("c1#0", 2, 0, 10),
			{who: "c2#0", id: "c2", term: 3, start: sec(5), end: sec(6)},
			{who: "c2#0", id: "c2", term: 4, start: sec(6), end: sec(20), firstSaw: sec(5)}, settled}, nil, nil},
		{"a write sent before the first look is a cold start", []*termRec{term("c1#0", 2, 0, 10),
			cold("c2#0", 3, 4, 4.5, 5, 20), settled}, nil, nil},
		{"a write sent after a look is no cold start", []*termRec{term("c1#0", 2, 0, 10),
			cold("c2#0", 3, 4.5, 4, 5, 20), settled}, nil, []string{vOverlap}},
		{"a lower term answered late inside a cold start's term is the fenced window", []*termRec{
			cold("c2#0", 3, 4, 4.5, 5, 20), cold("c1#0", 2, 1, -1, 6, 6), settled}, nil, nil},
		{"a term started on an overtaken write", []*termRec{
			cold("c2#0", 3, 4, 4.5, 5, 20), cold("c1#0", 2, 1, -1, 6, 6), settled}, nil, []string{vOvertaken}},
		{"a lower term answered late inside a term that saw the lease", []*termRec{
			cold("c2#0", 3, 4, 3, 5, 20), cold("c1#0", 2, 1, -1, 6, 6), settled}, nil, []string{vTermOrder, vOverlap}},
		{"cold start under a lower term", []*termRec{term("c1#0", 3, 0, 10),
			{who: "c2#0", id: "c2", term: 2, start: sec(5), end: sec(20)}, settled}, nil, []string{vTermOrder, vOverlap}},
		{"same identity, two incarnations", []*termRec{term("c1#0", 2, 0, 10), term("c1#1", 3, 5, 20), settled}, nil, []string{vOverlap}},
		{"term order", []*termRec{term("c1#0", 4, 0, 10), term("c2#0", 3, 20, 30), settled}, nil, []string{vTermOrder}},
		{"one term, two writers", []*termRec{term("c1#0", 3, 0, 10), term("c2#0", 4, 20, 30), settled},
			[]regOp{write("c1#0", 3, 5, true), write("c2#0", 3, 25, true)}, []string{vRegister}},
		{"register accepts an old term", []*termRec{term("c1#0", 3, 0, 10), term("c2#0", 4, 20, 30), settled},
			[]regOp{write("c2#0", 4, 25, true), write("c1#0", 3, 26, true)}, []string{vRegister}},
		{"settled leader refused", []*termRec{settled}, []regOp{write("c9#0", 7, 1, true), write("c0#0", 5, 125, false)},
			[]string{vFinalRefused}},
		{"unstable", []*termRec{settled, term("c1#0", 6, 125, 127)}, nil, []string{vUnstable, vOverlap}},
		{"own lease", []*termRec{{who: "c1#0", term: 2, start: sec(0), end: sec(10), firstSaw: sec(0), ownLeaseAtEnd: true}, settled}, nil,
			[]string{vOwnLease}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := synthetic(tt.terms, tt.ops)
			h.started = started[tt.name]
			if got := kinds(check(h)); !slices.Equal(got, tt.want) {
				t.Errorf("violations %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCheckerSettled checks the probes: no leader, two leaders, a stale view.
func TestCheckerSettled(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first probe
		want  []string
	}{
		{"no leader", probe{views: map[string]string{"c0": "c0"}}, []string{vNoLeader}},
		{"two leaders", probe{leaders: []string{"c0#0", "c1#0"}}, []string{vNoLeader}},
		{"stale view", probe{leaders: []string{"c0#0"}, terms: map[string]uint64{"c0#0": 5},
			views: map[string]string{"c0": "c0", "c1": "c1"}}, []string{vWedged}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := synthetic([]*termRec{{who: "c0#0", term: 5, start: sec(90), end: sec(150)}}, nil)
			tt.first.at = sec(119)
			h.probes[0] = tt.first
			if got := kinds(check(h)); !slices.Equal(got, tt.want) {
				t.Errorf("violations %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMemServerRestore checks the restore fault: versions go back, a later write
// reuses them, and a compare-and-swap with a pre-restore version can match again.
func TestMemServerRestore(t *testing.T) {
	ctx := context.Background()
	s := newMemServer("t")
	a := s.as("a")
	r1, err := a.Create(ctx, leaderelection.LeaseRecord{HolderIdentity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.Update(ctx, r1)
	if err != nil {
		t.Fatal(err)
	}
	r3, err := a.Update(ctx, r2)
	if err != nil {
		t.Fatal(err)
	}
	from, to, ok := s.restore(2)
	if !ok || from != r3.ResourceVersion || to != r1.ResourceVersion {
		t.Fatalf("restore(2) = %s, %s, %v; want %s, %s, true", from, to, ok, r3.ResourceVersion, r1.ResourceVersion)
	}
	if cur, exists, writer := s.current(); !exists || cur.ResourceVersion != r1.ResourceVersion || writer != writerRestore {
		t.Fatalf("after restore: %+v exists %v writer %q; want rv %s by %q", cur, exists, writer, r1.ResourceVersion, writerRestore)
	}
	if _, err := a.Update(ctx, r3); !errors.Is(err, leaderelection.ErrConflict) {
		t.Fatalf("update at the lost version %s: %v, want a conflict", r3.ResourceVersion, err)
	}
	b := s.as("b")
	again, err := b.Update(ctx, r1)
	if err != nil || again.ResourceVersion != r2.ResourceVersion {
		t.Fatalf("update after restore: %+v, %v; want the reused version %s", again, err, r2.ResourceVersion)
	}
	if _, err := a.Update(ctx, r2); err != nil {
		t.Fatalf("update with the pre-restore version %s that the new timeline reached: %v, want success", r2.ResourceVersion, err)
	}
}

// TestFaultStoreLostReply checks that a lost reply hides a write that was applied, and
// that a partition and a pause hold or fail calls.
func TestFaultStoreLostReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := newMemServer("t")
		count := newCounters()
		f := newFaultStore(1, count)
		f.setInner(s.as("a"))
		f.setFlaky(true, flakiness{loseReply: 1})
		if _, err := f.Create(ctx, leaderelection.LeaseRecord{HolderIdentity: "a"}); !errors.Is(err, errReplyLost) {
			t.Fatalf("create: %v, want %v", err, errReplyLost)
		}
		if cur, exists, writer := s.current(); !exists || cur.HolderIdentity != "a" || writer != "a" {
			t.Fatalf("the lost create was not applied: %+v %v %q", cur, exists, writer)
		}
		if got := count.get(fReplyLost); got != 1 {
			t.Errorf("counted %d lost replies, want 1", got)
		}
		f.setFlaky(false, flakiness{})
		f.partition(true, false)
		if _, err := f.Get(ctx); !errors.Is(err, errPartitioned) {
			t.Fatalf("get while partitioned: %v, want %v", err, errPartitioned)
		}
		f.partition(false, false)
		f.pause(true)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = f.Get(ctx)
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a paused candidate's call returned")
		default:
		}
		f.pause(false)
		<-done
	})
}

// TestFaultStoreOwnWritesAreNotSeeing: an incarnation's own writes, also one whose
// reply was lost and which it then reads back, do not count as seeing the lease
// (faultStore.firstSaw; a cold start stays one, seed 34712); a state another wrote
// does.
func TestFaultStoreOwnWritesAreNotSeeing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := newMemServer("t")
		f := newFaultStore(1, newCounters())
		f.setInner(s.as("a#0"))
		now := time.Now().Truncate(time.Microsecond)
		f.setFlaky(true, flakiness{loseReply: 1})
		if _, err := f.Create(ctx, leaderelection.LeaseRecord{HolderIdentity: "a", AcquireTime: now, RenewTime: now}); !errors.Is(err, errReplyLost) {
			t.Fatalf("create: %v, want %v", err, errReplyLost)
		}
		f.setFlaky(false, flakiness{})
		own, err := f.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if at := f.sawAt(); !at.IsZero() {
			t.Fatalf("reading back its own lost Create counted as seeing the lease at %v", at)
		}
		time.Sleep(time.Second)
		other := own
		other.HolderIdentity, other.AcquireTime, other.RenewTime = "b", time.Now(), time.Now()
		if _, err := s.as("b#0").Update(ctx, other); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Get(ctx); err != nil {
			t.Fatal(err)
		}
		if at := f.sawAt(); !at.Equal(time.Now()) {
			t.Fatalf("another's state read at %v counted from %v", time.Now(), at)
		}
	})
}

// TestCheckerTermOrderAcrossRestore: a term number is handed out when the acquiring
// write lands, so a restore after the send of an earlier term's write, even one before
// that term began (its answer came late), lets the store hand the number out again: a
// later lower term is a note. A restore before that send is not in between.
func TestCheckerTermOrderAcrossRestore(t *testing.T) {
	for _, tt := range []struct {
		name    string
		restore float64
		want    []string
	}{
		{"restore between the earlier write's send and its answer", 10.3, nil},
		{"restore before the earlier write's send", 9, []string{vTermOrder}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := synthetic([]*termRec{
				{who: "c2#0", id: "c2", term: 12, sent: sec(10), start: sec(10.4), end: sec(12), firstSaw: sec(0)},
				{who: "c0#1", id: "c0", term: 10, sent: sec(14.8), start: sec(14.9), end: sec(20), firstSaw: sec(11)},
				{who: "c0#0", id: "c0", term: 15, start: sec(90), end: sec(150)},
			}, nil)
			h.faults = []logEntry{{at: sec(tt.restore), kind: fRestore, text: "restored"}}
			h.probes[0].terms["c0#0"], h.probes[1].terms["c0#0"] = 15, 15
			if got := kinds(check(h)); !slices.Equal(got, tt.want) {
				t.Errorf("violations %v, want %v", got, tt.want)
			}
		})
	}
}
