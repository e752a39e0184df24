package sharded

import (
	"context"
	"sync"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// kubelet plays the kubelet's reports for the death signal of a history: each
// replica's incarnation is its identity, and report proves it over. Safe for
// concurrent use.
type kubelet struct {
	// mu guards dead.
	mu   sync.Mutex
	dead map[string]chan struct{} // by incarnation, closed by report
}

func newKubelet() *kubelet { return &kubelet{dead: map[string]chan struct{}{}} }

func (k *kubelet) chanLocked(inc string) chan struct{} {
	ch := k.dead[inc]
	if ch == nil {
		ch = make(chan struct{})
		k.dead[inc] = ch
	}
	return ch
}

// report proves inc over: call it only once inc's process is dead (node.die).
func (k *kubelet) report(inc string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	close(k.chanLocked(inc))
}

// watch returns the DeathWatch of a replica.
func (k *kubelet) watch() leaderelection.DeathWatch { return kubeletWatch{k} }

type kubeletWatch struct{ k *kubelet }

func (w kubeletWatch) Dead(_ context.Context, inc string) <-chan struct{} {
	w.k.mu.Lock()
	defer w.k.mu.Unlock()
	return w.k.chanLocked(inc)
}
