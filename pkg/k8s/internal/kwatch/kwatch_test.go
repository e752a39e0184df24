package kwatch

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func pod(name string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}} }

// collect runs Read on w in a goroutine and returns the names fn saw and Read's error.
func collect(ctx context.Context, w watch.Interface, silence time.Duration, stopAt string) (chan []string, chan error) {
	names, errc := make(chan []string, 1), make(chan error, 1)
	go func() {
		var seen []string
		err := Read(ctx, w, silence, func(ev watch.Event) bool {
			name := ev.Object.(*corev1.Pod).Name
			seen = append(seen, string(ev.Type)+":"+name)
			return name != stopAt
		})
		names <- seen
		errc <- err
	}()
	return names, errc
}

// TestReadDeliversAndEnds: object events reach fn in order, bookmarks do not, and each
// way a watch ends gives its error; Read stops the watch on every end.
func TestReadDeliversAndEnds(t *testing.T) {
	gone := apierrors.NewResourceExpired("too old")
	for _, tc := range []struct {
		name  string
		end   func(w *watch.FakeWatcher, cancel context.CancelFunc)
		stop  string
		want  []string
		check func(error) bool
	}{
		{"closed", func(w *watch.FakeWatcher, _ context.CancelFunc) { w.Stop() }, "",
			[]string{"ADDED:a", "MODIFIED:a", "DELETED:a"}, func(err error) bool { return errors.Is(err, ErrClosed) }},
		{"error", func(w *watch.FakeWatcher, _ context.CancelFunc) { w.Error(&gone.ErrStatus) }, "",
			[]string{"ADDED:a", "MODIFIED:a", "DELETED:a"}, func(err error) bool {
				var s apierrors.APIStatus
				return errors.As(err, &s) && s.Status().Code == http.StatusGone
			}},
		{"context", func(_ *watch.FakeWatcher, cancel context.CancelFunc) { cancel() }, "",
			[]string{"ADDED:a", "MODIFIED:a", "DELETED:a"}, func(err error) bool { return err == nil }},
		{"fn", func(*watch.FakeWatcher, context.CancelFunc) {}, "a",
			[]string{"ADDED:a"}, func(err error) bool { return err == nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := watch.NewFakeWithChanSize(8, false)
			names, errc := collect(ctx, w, 0, tc.stop)
			w.Add(pod("a"))
			if tc.stop == "" {
				w.Action(watch.Bookmark, pod("b"))
				w.Modify(pod("a"))
				w.Delete(pod("a"))
			}
			// The events are buffered and taken before an end that closes or errs; a
			// cancel races them, so what fn saw is not checked then.
			tc.end(w, cancel)
			got, err := <-names, <-errc
			if !tc.check(err) {
				t.Errorf("error %v", err)
			}
			if tc.name != "context" && !equal(got, tc.want) {
				t.Errorf("fn saw %v, want %v", got, tc.want)
			}
			if !w.IsStopped() {
				t.Error("the watch was not stopped")
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReadSilence: a watch that delivers nothing for the silence bound ends with
// ErrSilent; a bookmark or an event restarts the bound.
func TestReadSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := watch.NewFakeWithChanSize(8, false)
		names, errc := collect(t.Context(), w, time.Minute, "")
		time.Sleep(50 * time.Second)
		w.Action(watch.Bookmark, pod("b"))
		time.Sleep(50 * time.Second)
		w.Add(pod("a"))
		time.Sleep(50 * time.Second)
		synctest.Wait()
		select {
		case err := <-errc:
			t.Fatalf("ended after 50s of silence: %v", err)
		default:
		}
		time.Sleep(11 * time.Second)
		got, err := <-names, <-errc
		if !errors.Is(err, ErrSilent) {
			t.Errorf("error %v, want ErrSilent", err)
		}
		if !equal(got, []string{"ADDED:a"}) {
			t.Errorf("fn saw %v", got)
		}
	})
}
