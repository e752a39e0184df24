package leaderelection

import "sync"

// notifier calls OnNewLeader from a goroutine of its own, in the order of push, so that
// a slow callback never delays renews. push never blocks.
type notifier struct {
	fn   func(identity string)
	wake chan struct{} // capacity 1: a pending wake-up
	stop chan struct{} // closed by close

	// mu guards queue.
	mu    sync.Mutex
	queue []string
}

func newNotifier(fn func(string)) *notifier {
	return &notifier{fn: fn, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

func (n *notifier) push(identity string) {
	n.mu.Lock()
	n.queue = append(n.queue, identity)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run delivers until close, then delivers what is still queued and returns.
func (n *notifier) run() {
	for {
		select {
		case <-n.wake:
			n.drain()
		case <-n.stop:
			n.drain()
			return
		}
	}
}

// drain delivers the queue until push left nothing new.
func (n *notifier) drain() {
	for {
		n.mu.Lock()
		queue := n.queue
		n.queue = nil
		n.mu.Unlock()
		if len(queue) == 0 {
			return
		}
		for _, identity := range queue {
			n.fn(identity)
		}
	}
}

// close makes run return after the queued deliveries.
func (n *notifier) close() { close(n.stop) }
