package configchange_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/events"
	busevents "github.com/baton-dev/baton/pkg/events"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreCurrent()) }

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

const docA = `
frontends: [{name: http, bind: ":80", defaultBackend: web}]
backends: [{name: web, port: 8080}]
`

const docB = `
frontends: [{name: http, bind: ":81", defaultBackend: web}]
backends: [{name: web, port: 8080}]
`

const docBad = `
frontends: [{name: http, bind: "", defaultBackend: x}]
backends: [{name: web, port: 70000}]
`

var stateTypes = []string{events.EventTypeConfigValidated, events.EventTypeConfigInvalid}

// rig is a started bus with a handler on it and a subscription to its
// outcomes, made before the bus started as an all-replica consumer would.
type rig struct {
	bus *busevents.EventBus
	h   *configchange.ConfigChangeHandler
	ch  <-chan busevents.Event
}

func newRig(t *testing.T, src configchange.Source, logger *slog.Logger) *rig {
	t.Helper()
	if logger == nil {
		logger = discard
	}
	bus := busevents.NewEventBusWithLogger(64, discard)
	h, err := configchange.New(bus, configchange.Options{Source: src, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ch := busevents.Subscribe[busevents.Event](context.Background(), bus, "test", 64, busevents.Types(stateTypes[0], stateTypes[1:]...))
	bus.Start()
	t.Cleanup(bus.Stop)
	return &rig{bus: bus, h: h, ch: ch}
}

// run starts the handler and stops it when the test ends, failing the test
// if Start did not return cleanly.
func (r *rig) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.h.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Start returned %v", err)
		}
	})
}

// pending returns the events queued for the test subscriber, once every
// goroutine of the bubble is blocked.
func (r *rig) pending() []busevents.Event {
	synctest.Wait()
	var out []busevents.Event
	for {
		select {
		case e := <-r.ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (r *rig) one(t *testing.T) busevents.Event {
	t.Helper()
	evs := r.pending()
	if len(evs) != 1 {
		t.Fatalf("got %d events %v, want 1", len(evs), evs)
	}
	return evs[0]
}

func TestValidThenInvalidKeepsLastValid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, configchange.Static("test", []byte(docA)), nil)
		if r.h.Synced() {
			t.Error("Synced before any document")
		}
		r.run(t)
		v, ok := r.one(t).(*events.ConfigValidatedEvent)
		if !ok {
			t.Fatal("first event is not ConfigValidatedEvent")
		}
		_, wantVersion, _ := config.Load([]byte(docA))
		if v.Version != wantVersion || v.Source != "test" || v.Config.Frontends[0].Bind != ":80" {
			t.Errorf("validated event %+v", v)
		}
		if !r.h.Synced() {
			t.Error("not Synced after the first document")
		}

		_, err := r.h.Update(t.Context(), []byte(docBad))
		if !errors.Is(err, config.ErrInvalid) {
			t.Fatalf("Update(bad) = %v, want ErrInvalid", err)
		}
		inv, ok := r.one(t).(*events.ConfigInvalidEvent)
		if !ok {
			t.Fatal("no ConfigInvalidEvent")
		}
		var got []string
		for _, e := range inv.Errors {
			got = append(got, e.Error())
		}
		want := []string{
			"frontends[0].bind: must not be empty",
			`frontends[0].defaultBackend: unknown backend "x"`,
			"backends[0].port: must be between 1 and 65535",
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("invalid event errors %q, want %q", got, want)
		}
		if inv.Source != configchange.SourceUpdate || !strings.HasPrefix(inv.Version, "raw-") {
			t.Errorf("invalid event source %q version %q", inv.Source, inv.Version)
		}

		cur, ok := r.h.Current()
		if !ok || cur != v {
			t.Error("the invalid document replaced the last valid one")
		}
		st := r.h.Stats()
		if st.Validated != 1 || st.Invalid != 1 || st.CurrentVersion != wantVersion || !st.CurrentInvalid ||
			!strings.Contains(st.LastInvalidReason, "backends[0].port: must be between 1 and 65535") {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestUnchangedIsNotRepublished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, configchange.Static("test", []byte(docA)), nil)
		r.run(t)
		r.one(t)
		// The same content in another layout has the same version.
		vA, err := r.h.Update(t.Context(), []byte(strings.ReplaceAll(docA, "\n", "\n\n")))
		if err != nil {
			t.Fatal(err)
		}
		if evs := r.pending(); len(evs) != 0 {
			t.Fatalf("an unchanged document was published: %v", evs)
		}
		// A bad document twice: published once.
		r.h.Update(t.Context(), []byte(docBad))
		r.h.Update(t.Context(), []byte(docBad))
		if evs := r.pending(); len(evs) != 1 {
			t.Fatalf("a repeated invalid document gave %d events", len(evs))
		}
		// Back to A after an invalid one: published again, status must flip.
		again, err := r.h.Update(t.Context(), []byte(docA))
		if err != nil || again != vA {
			t.Fatalf("Update(A) = %q, %v; want %q", again, err, vA)
		}
		if _, ok := r.one(t).(*events.ConfigValidatedEvent); !ok {
			t.Fatal("A after an invalid document was not published")
		}
		vB, _ := r.h.Update(t.Context(), []byte(docB))
		if vB == vA {
			t.Error("B has A's version")
		}
		if e := r.one(t).(*events.ConfigValidatedEvent); e.Version != vB {
			t.Errorf("published %s, want %s", e.Version, vB)
		}
		st := r.h.Stats()
		if st.Validated != 3 || st.Invalid != 1 || st.Unchanged != 2 || st.CurrentInvalid {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestReplayerReplaysValidThenInvalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, configchange.Static("test", []byte(docA)), nil)
		if r.h.Replayer().Replay() {
			t.Error("Replay reported state before any document")
		}
		r.run(t)
		r.pending()
		r.h.Update(t.Context(), []byte(docBad))
		r.pending()

		late := busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), r.bus, "leader", 8, busevents.Types(stateTypes[0], stateTypes[1:]...))
		if !r.h.Replayer().Replay() {
			t.Fatal("Replay reported no state")
		}
		synctest.Wait()
		first, second := <-late, <-late
		v, ok1 := first.(*events.ConfigValidatedEvent)
		inv, ok2 := second.(*events.ConfigInvalidEvent)
		if !ok1 || !ok2 {
			t.Fatalf("replayed %T then %T, want validated then invalid", first, second)
		}
		if inv.Timestamp().Before(v.Timestamp()) {
			t.Error("invalid event is older than the valid one it came after")
		}

		// Once a valid document follows, the old refusal is not replayed.
		r.h.Update(t.Context(), []byte(docB))
		r.pending()
		later := busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), r.bus, "leader-2", 8, busevents.Types(stateTypes[0], stateTypes[1:]...))
		r.h.Replayer().Replay()
		synctest.Wait()
		if got := len(later); got != 1 {
			t.Fatalf("replayed %d events after a valid document, want 1", got)
		}
		if _, ok := (<-later).(*events.ConfigValidatedEvent); !ok {
			t.Error("replayed something other than the valid configuration")
		}
	})
}

func TestFileSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	write := func(doc string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write(docA, base)

	synctest.Test(t, func(t *testing.T) {
		src, err := configchange.File(path, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if src.String() != "file:"+path {
			t.Errorf("String = %q", src.String())
		}
		r := newRig(t, src, nil)
		r.run(t)
		e := r.one(t).(*events.ConfigValidatedEvent)
		_, vA, _ := config.Load([]byte(docA))
		if e.Version != vA || e.Source != "file:"+path {
			t.Errorf("event %+v", e)
		}

		write(docB, base.Add(time.Second))
		time.Sleep(4 * time.Second)
		if evs := r.pending(); len(evs) != 0 {
			t.Fatalf("file re-read before the poll interval: %v", evs)
		}
		time.Sleep(time.Second)
		_, vB, _ := config.Load([]byte(docB))
		if e := r.one(t).(*events.ConfigValidatedEvent); e.Version != vB {
			t.Errorf("after change: version %s, want %s", e.Version, vB)
		}

		// Unchanged stat: not even read. Two polls, no event.
		time.Sleep(10 * time.Second)
		if evs := r.pending(); len(evs) != 0 {
			t.Fatalf("an unchanged file was delivered: %v", evs)
		}

		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		inv := r.one(t).(*events.ConfigInvalidEvent)
		if len(inv.Errors) != 1 || !errors.Is(inv.Errors[0], os.ErrNotExist) {
			t.Errorf("missing file gave %v", inv.Errors)
		}
		time.Sleep(10 * time.Second)
		if evs := r.pending(); len(evs) != 0 {
			t.Fatalf("a still-missing file was reported again: %v", evs)
		}

		write(docBad, base.Add(2*time.Second))
		time.Sleep(5 * time.Second)
		if _, ok := r.one(t).(*events.ConfigInvalidEvent); !ok {
			t.Fatal("a bad file was not reported invalid")
		}
		if cur, _ := r.h.Current(); cur.Version != vB {
			t.Errorf("current version %s, want the last valid %s", cur.Version, vB)
		}
	})
}

// failingSource delivers nothing and fails.
type failingSource struct{}

func (failingSource) String() string { return "failing" }
func (failingSource) Run(context.Context, func(configchange.Document)) error {
	return errors.New("boom")
}

func TestSourceFailureFailsStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, failingSource{}, nil)
		err := r.h.Start(t.Context())
		if err == nil || !strings.Contains(err.Error(), "configchange: source failing: boom") {
			t.Fatalf("Start = %v", err)
		}
		if _, err := r.h.Update(t.Context(), []byte(docA)); !errors.Is(err, configchange.ErrStopped) {
			t.Errorf("Update after Start returned: %v, want ErrStopped", err)
		}
		if err := r.h.Start(t.Context()); !errors.Is(err, configchange.ErrAlreadyStarted) {
			t.Errorf("second Start = %v, want ErrAlreadyStarted", err)
		}
	})
}

func TestUpdateBeforeStartHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, configchange.Default(), nil)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := r.h.Update(ctx, []byte(docA)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Update before Start = %v, want the context's deadline", err)
		}
	})
}

func TestInvalidIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, nil))
		r := newRig(t, configchange.Default(), logger)
		r.run(t)
		r.h.Update(t.Context(), []byte(docBad))
		r.pending()
		out := buf.String()
		for _, want := range []string{"configuration validated", "source=default",
			"configuration invalid; keeping the last valid one", "backends[0].port: must be between 1 and 65535"} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q:\n%s", want, out)
			}
		}
	})
}

func TestConstructorsCheckArguments(t *testing.T) {
	bus := busevents.NewEventBusWithLogger(1, discard)
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"bus", func() error {
			_, err := configchange.New(nil, configchange.Options{Source: configchange.Default()})
			return err
		}, "configchange: bus is nil"},
		{"source", func() error { _, err := configchange.New(bus, configchange.Options{}); return err }, "configchange: options: source is nil"},
		{"file path", func() error { _, err := configchange.File("", 0); return err }, "configchange: file source: path is empty"},
		{"file interval", func() error { _, err := configchange.File("x", -1); return err }, "configchange: file source: interval -1ns is negative"},
		{"configmap clientset", func() error { _, err := configchange.ConfigMap(nil, "ns", "n", ""); return err }, "configchange: configmap source: clientset is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.err(); err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func ExampleConfigChangeHandler_Update() {
	bus := busevents.NewEventBusWithLogger(16, discard)
	h, _ := configchange.New(bus, configchange.Options{Source: configchange.Default(), Logger: discard})
	outcomes := busevents.Subscribe[busevents.Event](context.Background(), bus, "example", 16, busevents.Types(stateTypes[0], stateTypes[1:]...))
	bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.Start(ctx) }()

	fmt.Println((<-outcomes).EventType())
	_, err := h.Update(ctx, []byte("frontends: [{name: http, bind: ':80', defaultBackend: api}]\nbackends: [{name: web, port: 8080}]\n"))
	fmt.Println(errors.Is(err, config.ErrInvalid))
	inv := (<-outcomes).(*events.ConfigInvalidEvent)
	fmt.Println(inv.Errors[0])
	cur, _ := h.Current()
	fmt.Println("in force:", cur.Source)

	cancel()
	<-done
	bus.Stop()
	// Output:
	// config.validated
	// true
	// frontends[0].defaultBackend: unknown backend "api"
	// in force: default
}

// panicSource is a Source whose Run panics.
type panicSource struct{}

func (panicSource) String() string { return "panicking" }
func (panicSource) Run(context.Context, func(configchange.Document)) error {
	panic("source exploded")
}

// TestPanickingSourceFailsTheHandler: a source that panics fails the
// handler (Start returns an error wrapping ErrSourcePanicked); the process
// goes on.
func TestPanickingSourceFailsTheHandler(t *testing.T) {
	bus := busevents.NewEventBusWithLogger(0, slog.New(slog.DiscardHandler))
	bus.Start()
	defer bus.Stop()
	h, err := configchange.New(bus, configchange.Options{Source: panicSource{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	err = h.Start(t.Context())
	if !errors.Is(err, configchange.ErrSourcePanicked) || !strings.Contains(err.Error(), "source exploded") {
		t.Fatalf("Start = %v, want ErrSourcePanicked with the panic value", err)
	}
}
