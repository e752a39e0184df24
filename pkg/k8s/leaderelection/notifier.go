package leaderelection

import "sync"

// notifier calls OnNewLeader from a goroutine of its own, in the order of push, so that
// a slow callback never delays renews. push never blocks. Two queues take turns, one
// filled by push while run delivers the other, so a change of holder costs no
// allocation once they have grown to the pushes that come in one delivery.
type notifier struct {
	fn   func(identity string)
	wake chan struct{} // capacity 1: a pending wake-up
	stop chan struct{} // closed by close
	// spare is the queue run delivered last, emptied, handed back to push at the next
	// drain. Used by run's goroutine only.
	spare []string

	// mu guards queue.
	mu    sync.Mutex
	queue []string
}

// notifierQueue is the initial room of each queue: a holder change or two per
// delivery is the common case.
const notifierQueue = 4

func newNotifier(fn func(string)) *notifier {
	return &notifier{
		fn: fn, wake: make(chan struct{}, 1), stop: make(chan struct{}),
		queue: make([]string, 0, notifierQueue), spare: make([]string, 0, notifierQueue),
	}
}

// push queues identity for delivery.
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

// drain delivers the queue until push left nothing new, swapping in the spare queue
// each round.
func (n *notifier) drain() {
	for {
		n.mu.Lock()
		queue := n.queue
		n.queue = n.spare
		n.mu.Unlock()
		for _, identity := range queue {
			n.fn(identity)
		}
		clear(queue) // keep no identity alive
		n.spare = queue[:0]
		if len(queue) == 0 {
			return
		}
	}
}

// close makes run return after the queued deliveries.
func (n *notifier) close() { close(n.stop) }
