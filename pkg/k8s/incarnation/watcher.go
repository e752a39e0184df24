package incarnation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/k8s/internal/kwatch"
)

// The pause before a pod watch is opened again: watchRetry after the server ended a
// watch, doubling after each failed open (a missing RBAC grant, the API server down)
// up to maxWatchRetry.
const (
	watchRetry    = time.Second
	maxWatchRetry = 30 * time.Second
)

// Watcher watches the pods of incarnations for proof that they are over. It
// implements the elector's death watch (leaderelection.DeathWatch). Its methods are
// safe for concurrent use.
type Watcher struct {
	clientset kubernetes.Interface
	logger    *slog.Logger
	// wg counts the goroutines Dead starts.
	wg sync.WaitGroup
}

// NewWatcher returns a Watcher that reads pods with clientset (List and Watch on pods
// in the incarnation's namespace, by the field selector metadata.name). A nil logger
// discards logs. It returns an error when clientset is nil.
func NewWatcher(clientset kubernetes.Interface, logger *slog.Logger) (*Watcher, error) {
	if clientset == nil {
		return nil, fmt.Errorf("incarnation: NewWatcher: clientset is nil")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{clientset: clientset, logger: logger}, nil
}

// Dead returns a channel that is closed once the status of the pod of incarnation (as
// String encodes it) proves it over (ProvesDead); the channel is never closed
// otherwise. One goroutine lists and watches that pod by name, re-listing a second
// after the server ends the watch (longer after failures, up to 30s), until the proof or the end of ctx. A pod that is absent or
// deleted proves nothing; the goroutine keeps watching (a force-deleted pod's kubelet
// may still report, and the name may come back only with another UID, which proves
// nothing either). An incarnation that does not parse gets a channel that is never
// closed, and a log line. Wait waits for the goroutines.
func (w *Watcher) Dead(ctx context.Context, incarnation string) <-chan struct{} {
	dead := make(chan struct{})
	inc, err := Parse(incarnation)
	if err != nil {
		w.logger.Warn("not watching the lease holder's pod: its incarnation does not parse", "error", err)
		return dead
	}
	w.wg.Go(func() {
		retry := watchRetry
		for {
			proven, err := w.follow(ctx, inc)
			if proven {
				w.logger.Info("lease holder's container reported terminated", "incarnation", incarnation)
				close(dead)
				return
			}
			if ctx.Err() != nil {
				return
			}
			pause := watchRetry
			if err != nil {
				pause, retry = retry, min(2*retry, maxWatchRetry)
				w.logger.Warn("watching the lease holder's pod failed, watching again", "pod", inc.PodNamespace+"/"+inc.PodName,
					"after", pause, "error", err)
			} else {
				retry = watchRetry
			}
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	})
	return dead
}

// Wait waits for the goroutines of Dead to end (each ends with its context or a proof).
func (w *Watcher) Wait() { w.wg.Wait() }

// follow lists inc's pod and watches it from the list's version; it returns true once a
// status proves inc over, false with the error (nil when the server ended the watch)
// otherwise.
func (w *Watcher) follow(ctx context.Context, inc Incarnation) (bool, error) {
	pods := w.clientset.CoreV1().Pods(inc.PodNamespace)
	selector := fields.OneTermEqualSelector("metadata.name", inc.PodName).String()
	list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return false, err
	}
	for i := range list.Items {
		if p := &list.Items[i]; p.Name == inc.PodName && ProvesDead(inc, p) {
			return true, nil
		}
	}
	wi, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		return false, err
	}
	proven := false
	err = kwatch.Read(ctx, wi, 0, func(ev watch.Event) bool {
		// A Deleted event proves nothing: a force delete removes a pod whose process
		// may still run.
		p, isPod := ev.Object.(*corev1.Pod)
		proven = ev.Type != watch.Deleted && isPod && p.Name == inc.PodName && ProvesDead(inc, p)
		return !proven
	})
	if errors.Is(err, kwatch.ErrClosed) {
		err = nil
	}
	return proven, err
}
