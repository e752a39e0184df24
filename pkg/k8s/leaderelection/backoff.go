package leaderelection

import "time"

// backoff yields retry delays that double from initial up to max, each stretched by a
// random jitter of up to factor times itself, so candidates that failed together do not
// retry together. Not safe for concurrent use; each is owned by the election goroutine.
type backoff struct {
	initial, max time.Duration
	factor       float64
	rand         func() float64 // in [0, 1)
	next         time.Duration
}

// Next returns the delay before the next attempt and doubles the one after it.
func (b *backoff) Next() time.Duration {
	d := b.next
	if d <= 0 {
		d = b.initial
	}
	b.next = min(2*d, b.max)
	return d + time.Duration(b.factor*b.rand()*float64(d))
}

// Reset makes the next delay the initial one again.
func (b *backoff) Reset() { b.next = 0 }
