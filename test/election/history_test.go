package election

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// leaseState is one state of the lease in its write history.
type leaseState struct {
	rv          uint64
	deleted     bool
	holder      string
	acquireTime time.Time
	transitions int32
	seen        mtime // when the recorder saw it
}

func (s leaseState) String() string {
	if s.deleted {
		return fmt.Sprintf("rv %d deleted", s.rv)
	}
	return fmt.Sprintf("rv %d holder %q acquired %s transitions %d", s.rv, s.holder, s.acquireTime.Format(time.StampMicro), s.transitions)
}

// leaseHistory records every state of one Lease through a watch that resumes from
// the last resourceVersion it saw, so it misses nothing across broken watches and
// API server restarts (unless the server answers 410 Gone, counted in relists).
type leaseHistory struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}

	// mu guards the fields below.
	mu      sync.Mutex
	states  []leaseState // by rv
	relists int
}

// recordHistory starts recording the Lease namespace/name until t ends.
func recordHistory(t testing.TB, cs kubernetes.Interface, namespace, name string) *leaseHistory {
	ctx, cancel := context.WithCancel(context.Background())
	h := &leaseHistory{name: name, cancel: cancel, done: make(chan struct{})}
	leases := cs.CoordinationV1().Leases(namespace)
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	go func() {
		defer close(h.done)
		rv := ""
		retry := func() {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		for ctx.Err() == nil {
			if rv == "" {
				list, err := leases.List(ctx, metav1.ListOptions{FieldSelector: selector})
				if err != nil {
					retry()
					continue
				}
				for i := range list.Items {
					h.add(&list.Items[i], false)
				}
				rv = list.ResourceVersion
			}
			w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				retry()
				continue
			}
			for ev := range w.ResultChan() {
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					if l, ok := ev.Object.(*coordinationv1.Lease); ok {
						h.add(l, ev.Type == watch.Deleted)
						rv = l.ResourceVersion
					}
				case watch.Bookmark:
					if l, ok := ev.Object.(*coordinationv1.Lease); ok {
						rv = l.ResourceVersion
					}
				case watch.Error:
					if err := apierrors.FromObject(ev.Object); apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
						h.mu.Lock()
						h.relists++
						h.mu.Unlock()
						rv = ""
					}
				}
			}
			w.Stop()
		}
	}()
	t.Cleanup(h.stop)
	return h
}

func (h *leaseHistory) stop() {
	h.cancel()
	<-h.done
}

func (h *leaseHistory) add(l *coordinationv1.Lease, deleted bool) {
	rv, err := strconv.ParseUint(l.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	s := leaseState{rv: rv, deleted: deleted, seen: now()}
	if !deleted {
		if p := l.Spec.HolderIdentity; p != nil {
			s.holder = *p
		}
		if p := l.Spec.AcquireTime; p != nil {
			s.acquireTime = p.Time
		}
		if p := l.Spec.LeaseTransitions; p != nil {
			s.transitions = *p
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i, found := slices.BinarySearchFunc(h.states, rv, func(s leaseState, rv uint64) int {
		switch {
		case s.rv < rv:
			return -1
		case s.rv > rv:
			return 1
		}
		return 0
	})
	if !found {
		h.states = slices.Insert(h.states, i, s)
	}
}

func (h *leaseHistory) snapshot() ([]leaseState, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.states), h.relists
}

// waitSeen waits until the history holds a state with resourceVersion >= rv.
func (h *leaseHistory) waitSeen(t testing.TB, rv uint64) {
	t.Helper()
	waitFor(t, 5*time.Second, fmt.Sprintf("lease %s history to reach rv %d", h.name, rv), func() bool {
		s, _ := h.snapshot()
		return len(s) > 0 && s[len(s)-1].rv >= rv
	})
}

// checkAcquisition asserts that term is the resourceVersion of a write by who that
// acquired the lease: the state before it was absent, deleted, released, held by
// another, or held by who under another acquireTime (a new term of who).
func (h *leaseHistory) checkAcquisition(t testing.TB, who string, term uint64) {
	t.Helper()
	h.waitSeen(t, term)
	states, relists := h.snapshot()
	i := slices.IndexFunc(states, func(s leaseState) bool { return s.rv == term })
	if i < 0 {
		if relists > 0 {
			t.Logf("term %d of %s not in the history of lease %s after %d relists", term, who, h.name, relists)
			return
		}
		t.Errorf("term %d of %s is not the resourceVersion of any write of lease %s; history:\n%s", term, who, h.name, h.dump())
		return
	}
	s := states[i]
	if s.deleted || s.holder != who {
		t.Errorf("term %d of %s: the write with that resourceVersion is %v", term, who, s)
		return
	}
	if i == 0 {
		return // the first state seen: created by who, or the first write the watch saw
	}
	prev := states[i-1]
	if !prev.deleted && prev.holder == who && prev.acquireTime.Equal(s.acquireTime) {
		t.Errorf("term %d of %s: write %v only renewed %v; it acquired nothing", term, who, s, prev)
	}
}

func (h *leaseHistory) dump() string {
	states, _ := h.snapshot()
	var out string
	for _, s := range states {
		out += "  " + s.String() + "\n"
	}
	return out
}
