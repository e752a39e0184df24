package sharding

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Run runs this replica's part of the ring until ctx ends, then leaves gracefully,
// and returns nil once it has left. In order:
//
//  1. It reads the member Leases, to see who runs already.
//  2. It starts one elector per shard, each following its shard's Lease (campaigning
//     only for the shards placement gives it), and waits until every one has seen
//     its Lease (so a hand-over to it is taken at once).
//  3. It joins: it writes its member Lease, active, and renews it every RetryPeriod.
//     The others see it and hand it its shards. It campaigns once admitted: a view of
//     the members that includes its write shows no active member of another ring
//     shape (shape.go; docs/design/sharding.md, # Ring shape).
//  4. Until ctx ends, it keeps its view of the members and the placement over them
//     (a member whose holder incarnation a shard elector proved dead is gone at once),
//     campaigns for the shards placement gives it (its electors take a shard when its
//     Lease is free, expired, its holder proven dead, or handed over to it), and hands
//     each shard it leads but placement gives to another live member over to that
//     member, SettleDelay after the last change (in waves: see handOverWaves).
//  5. When ctx ends it leaves: it stops campaigning, marks its member Lease leaving,
//     hands every shard it leads to its owner in the placement without it (and, with
//     other members, any handed to it until SettleDelay after its mark), then stops
//     its electors (which release any shard still held), and deletes its member
//     Lease. Shard work keeps its term context until its shard is handed over.
//
// A second call returns ErrAlreadyStarted.
func (s *Sharder) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	l := &loop{s: s, want: MemberActive, rand: newShapeRand(s.config.Identity),
		follows: map[string]context.CancelFunc{}, reaped: map[string]string{}}
	// Electors run under their own context: after ctx ended they keep leading until
	// their shards are handed over.
	electorsCtx, stopElectors := context.WithCancel(context.WithoutCancel(ctx))
	var electors sync.WaitGroup
	defer func() {
		stopElectors()
		electors.Wait()
		l.handovers.Wait()
		l.opens.Wait()
		l.stopFollows()
		l.reapers.Wait()
	}()

	// 1. The members.
	if !l.firstMembers(ctx) {
		return nil
	}
	// 2. The electors, warm.
	for _, e := range s.electors {
		electors.Go(func() {
			if err := e.Start(electorsCtx); err != nil {
				s.logger.Warn("shard elector stopped", "error", err)
			}
		})
	}
	for _, e := range s.electors {
		select {
		case <-e.Synced():
		case <-ctx.Done():
		}
	}
	// 3. Join, 4. run, 5. leave.
	if ctx.Err() == nil {
		l.renew(ctx)
		s.logger.Info("joined", "members", s.Members())
		l.run(ctx)
	}
	l.leave(ctx)
	// The member Lease goes only once every shard term ended: until then a replica of
	// another shape waits for it (# Ring shape).
	stopElectors()
	electors.Wait()
	l.depart(ctx)
	return nil
}

// loop is the state of Run's goroutine.
type loop struct {
	s        *Sharder
	liveness liveness
	// The member watch: opening while the store's Watch call is under way (it may
	// hang: a black-holed List), then open (events), or neither until watchAt.
	opening   <-chan openedWatch
	openedAt  time.Time
	opens     sync.WaitGroup // the goroutines of Watch calls
	events    <-chan MemberEvent
	stopWatch context.CancelFunc // ends the watch open or opening
	watchAt   time.Time          // when to watch the members again, while neither
	renewAt   time.Time
	// rebalanceAt is when to hand over the shards placed elsewhere; zero when nothing
	// changed since the last time.
	rebalanceAt time.Time
	handovers   sync.WaitGroup
	// The member Lease and admission (shape.go): want is the state the next renew
	// writes; activeVersion the Version of the write that made it active, until this
	// replica is admitted ("" before that write); retryActiveAt when a waiting
	// replica may try again. The send of the last write that succeeded is the
	// Sharder's renewedAt.
	want          MemberState
	activeVersion string
	retryActiveAt time.Time
	rand          *rand.Rand
	// follows are the members' deaths followed (followDeaths): the cancel of each
	// follow, by incarnation; followers counts their goroutines.
	follows   map[string]context.CancelFunc
	followers sync.WaitGroup
	// reaped is the version of each member Lease reap deleted, or tried to; reapers
	// counts the deletes under way.
	reaped  map[string]string
	reapers sync.WaitGroup
}

// firstMembers opens the member watch and takes its first event; it reports false
// when ctx ended first.
func (l *loop) firstMembers(ctx context.Context) bool {
	for {
		if l.events == nil && l.opening == nil && !l.s.clock.Now().Before(l.watchAt) {
			l.watch(ctx)
		}
		l.giveUpHungWatch()
		var wake chan struct{} // nil while the watch is open: its event is what to wait for
		var timer leaderelection.Timer
		if l.events == nil {
			at := l.watchAt
			if l.opening != nil {
				at = l.openedAt.Add(l.s.config.RenewDeadline)
			}
			w := make(chan struct{})
			wake, timer = w, l.s.clock.AfterFunc(at.Sub(l.s.clock.Now()), func() { close(w) })
		}
		done, ok := l.firstEvent(ctx, wake)
		if timer != nil {
			timer.Stop()
		}
		if done {
			return ok
		}
	}
}

// firstEvent waits for the Watch call, an event of the watch, wake or the end of ctx;
// done is true when firstMembers is over, ok whether it got the members.
func (l *loop) firstEvent(ctx context.Context, wake <-chan struct{}) (done, ok bool) {
	select {
	case o := <-l.opening:
		l.opened(o)
	case ev, ok := <-l.events:
		if l.receive(ev, ok) {
			return true, true
		}
	case <-wake:
	case <-ctx.Done():
		l.closeWatch()
		return true, false
	}
	return false, false
}

// openedWatch is the outcome of a Watch call.
type openedWatch struct {
	events <-chan MemberEvent
	err    error
}

// watch calls the store's Watch in a goroutine of its own: a call that hangs (a
// black-holed List) must not hold up the loop, which renews the member Lease. The
// watch outlives ctx, for leave (followSigns); closeWatch ends it.
func (l *loop) watch(ctx context.Context) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	opening := make(chan openedWatch)
	l.opens.Go(func() {
		events, err := l.s.members.Watch(wctx)
		select {
		case opening <- openedWatch{events, err}:
		case <-wctx.Done(): // given up, or Run ends
			if err == nil {
				for range events { // until the store closes it
				}
			}
		}
	})
	l.opening, l.openedAt, l.stopWatch = opening, l.s.clock.Now(), cancel
}

// opened takes the outcome of the Watch call under way.
func (l *loop) opened(o openedWatch) {
	l.opening = nil
	if o.err != nil {
		l.stopWatch()
		l.stopWatch = nil
		l.s.logger.Warn("watching members failed", "error", o.err)
		l.watchAt = l.s.clock.Now().Add(l.s.config.RetryPeriod)
		return
	}
	l.events = o.events
}

// giveUpHungWatch gives up a Watch call under way for RenewDeadline, as the elector
// does with a shard's, and watches again a RetryPeriod later.
func (l *loop) giveUpHungWatch() {
	now := l.s.clock.Now()
	if l.opening == nil || now.Before(l.openedAt.Add(l.s.config.RenewDeadline)) {
		return
	}
	l.s.logger.Warn("watching members timed out", "after", l.s.config.RenewDeadline)
	l.stopWatch()
	l.opening, l.stopWatch = nil, nil
	l.watchAt = now.Add(l.s.config.RetryPeriod)
}

func (l *loop) closeWatch() {
	if l.stopWatch != nil {
		l.stopWatch() // also ends a Watch call under way, whose goroutine drains its events
	}
	if l.events != nil {
		for range l.events { // until the store closes it
		}
	}
	l.events, l.opening, l.stopWatch = nil, nil, nil
}

// receive takes one receive of the member watch; it reports whether it carried the
// members.
func (l *loop) receive(ev MemberEvent, ok bool) bool {
	if !ok || ev.Err != nil {
		if ev.Err != nil {
			l.s.logger.Warn("member watch broke", "error", ev.Err)
		}
		l.closeWatch()
		l.watchAt = l.s.clock.Now().Add(l.s.config.RetryPeriod)
		return false
	}
	now := l.s.clock.Now()
	l.s.signs.observe(now, ev.Members)
	outOfRange := l.liveness.observe(now, ev.Members, l.s.config.LeaseDuration)
	l.s.setWrites(l.liveness.writes())
	if l.s.setUnvouched(l.liveness.unvouched()) && l.rebalanceAt.IsZero() {
		l.rebalanceAt = now.Add(l.s.config.SettleDelay) // a member it withheld hand-overs from renewed
	}
	for _, m := range outOfRange {
		l.s.outOfRange.Add(1)
		bounded, _ := leaderelection.BoundLeaseDuration(m.LeaseDuration, l.s.config.LeaseDuration)
		l.s.logger.Warn("member lease value out of range", "field", "leaseDurationSeconds", "value", m.LeaseDuration.String(),
			"taken_as", bounded.String(), "member", m.Identity, "version", m.Version)
	}
	l.replace(now)
	return true
}

// replace recomputes the live members and the placement over them at now. Only
// this goroutine changes leaving and live, so it computes the placement outside the
// lock and only stores it under it.
func (l *loop) replace(now time.Time) {
	s := l.s
	v := l.view(now)
	l.admit(now, v)
	s.mu.Lock()
	leaving, admitted, prev := s.leaving, s.admitted, s.live
	s.mu.Unlock()
	live := v.peers
	if admitted && !leaving {
		live = append(live, s.config.Identity)
		slices.Sort(live)
	}
	if slices.Equal(live, prev) {
		return
	}
	placement := Place(s.ring, live)
	s.mu.Lock()
	prevPlacement := s.placement
	s.live, s.placement = live, placement
	s.mu.Unlock()
	l.notePlaced(now, prevPlacement, placement)
	s.place(placement, leaving)
	s.moved.notify(now)
	if slices.ContainsFunc(prev, func(id string) bool { _, ok := slices.BinarySearch(live, id); return !ok }) {
		s.recheck() // a shard handed to a member that went is taken at once (candidateGone)
	}
	s.logger.Info("members changed", "members", live, "assigned", len(placement.Shards(s.config.Identity)))
	l.rebalanceAt = now.Add(s.config.SettleDelay)
}

// renew writes this replica's member Lease, in state l.want. While admitted, the
// write is given up by RenewDeadline after the last one that succeeded, when
// checkMembership ends the admission.
func (l *loop) renew(ctx context.Context) {
	s := l.s
	now := s.clock.Now()
	timeout := s.config.RenewDeadline
	s.mu.Lock()
	admitted, until := s.admitted, s.renewedUntilLocked()
	s.mu.Unlock()
	if left := until.Sub(now); admitted && left > 0 && left < timeout {
		timeout = left
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	want := l.want
	claimed := s.ownedShards()
	version, err := s.members.Renew(cctx, s.memberLease(want, claimed))
	switch {
	case err != nil && ctx.Err() == nil:
		s.logger.Warn("renewing member lease failed", "error", err)
	case err == nil:
		s.setRenewed(now)
		s.signs.wrote(version, now)
		s.livenessRenewed(now, claimed)
		if want == MemberActive && l.activeVersion == "" {
			l.activeVersion = version
		}
	}
	l.renewAt = s.clock.Now().Add(s.config.RetryPeriod)
}

// run is step 4 of Run, until ctx ends.
func (l *loop) run(ctx context.Context) {
	s := l.s
	wake := make(chan struct{}, 1)
	for ctx.Err() == nil {
		now := s.clock.Now()
		l.checkMembership(now)
		if !now.Before(l.renewAt) {
			l.renew(ctx)
			// The renew may have taken until the admission's deadline: look again
			// now, before anything else (a stale now let electors campaign past it).
			now = s.clock.Now()
			l.checkMembership(now)
		}
		for _, d := range s.takeDead() {
			if l.liveness.kill(d.identity, d.incarnation) {
				s.logger.Info("member proven dead: no longer counted live", "member", d.identity)
			}
		}
		l.followDeaths()
		l.giveUpHungWatch()
		if l.events == nil && l.opening == nil && !now.Before(l.watchAt) {
			l.watch(ctx)
		}
		l.replace(now) // members expire by time
		l.reap(ctx, now)
		if !l.rebalanceAt.IsZero() && !now.Before(l.rebalanceAt) {
			l.rebalanceAt = time.Time{}
			l.rebalance(ctx)
		}
		at := l.renewAt
		switch {
		case l.opening != nil:
			at = earlier(at, l.openedAt.Add(s.config.RenewDeadline))
		case l.events == nil:
			at = earlier(at, l.watchAt)
		}
		if exp, ok := l.liveness.nextExpiry(now); ok {
			at = earlier(at, exp)
		}
		if !l.rebalanceAt.IsZero() {
			at = earlier(at, l.rebalanceAt)
		}
		at = earlier(at, l.admissionAt(now))
		t := s.clock.AfterFunc(at.Sub(now), func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		select {
		case <-ctx.Done():
		case o := <-l.opening:
			l.opened(o)
		case ev, ok := <-l.events:
			l.receive(ev, ok)
		case <-s.kicks:
			if l.rebalanceAt.IsZero() {
				l.rebalanceAt = s.clock.Now().Add(s.config.SettleDelay)
			}
		case <-s.deathKicks:
		case <-wake:
		}
		t.Stop()
	}
	// The watch stays open for leave (followSigns), which closes it.
}

// followDeaths follows, with the death signal on, the death of every member this
// replica counts (their incarnations, shared with the electors' watches of holders),
// and stops following those it no longer counts. A member proven dead is counted
// gone at once, as a holder proven dead is: without this, a member that holds no
// shard here is counted until its lease expires, and a replica that started after
// that member's last renew counts it for a LeaseDuration after its own first look at
// the members, longer than the others, who saw it renew, do. Placement then differs
// (a restarted replica on a real node left a shard that the others placed on it,
// and it placed on the dead member, ownerless for that LeaseDuration).
func (l *loop) followDeaths() {
	s := l.s
	if s.deaths == nil {
		return
	}
	want := l.liveness.incarnations(s.config.Identity)
	for inc, stop := range l.follows {
		if _, ok := want[inc]; !ok {
			stop()
			delete(l.follows, inc)
		}
	}
	for inc, id := range want {
		if _, ok := l.follows[inc]; ok {
			continue
		}
		ctx, stop := context.WithCancel(context.Background())
		l.follows[inc] = stop
		dead := s.deaths.Dead(ctx, inc)
		l.followers.Go(func() {
			select {
			case <-dead:
				s.memberDead(id, inc)
			case <-ctx.Done():
			}
		})
	}
}

// reap deletes the member Lease of each member this replica no longer counts
// (expired by its clock, or proven dead) that no shard Lease names holder as this
// replica's electors see them, if the Lease is still as it was last seen (Expire).
// Nothing else deletes a crashed member's Lease, and a replica that starts later
// counts every one it sees on its first look for a LeaseDuration after that look (it
// cannot tell how old it is), placing shards on members long gone. Why not one that
// holders still name: its deletion is a sign of life for the shards it claimed
// (memberSigns.observe), and would put off a takeover by a LeaseDuration. Each
// replica tries once per version; the precondition lets one delete win and spares a
// member that renewed meanwhile (its next renew creates its Lease again if it was
// deleted anyway). At most one delete per member is under way, each given up
// RenewDeadline after it was sent.
func (l *loop) reap(ctx context.Context, now time.Time) {
	s := l.s
	for id := range l.reaped {
		if _, _, seen := l.liveness.version(id); !seen {
			delete(l.reaped, id) // its Lease is gone from the view
		}
	}
	var due []MemberLease
	for _, m := range l.liveness.gone(now, s.config.Identity) {
		if l.reaped[m.Identity] != m.Version {
			due = append(due, m)
		}
	}
	if len(due) == 0 {
		return
	}
	holders := map[string]bool{}
	for _, e := range s.electors {
		holders[e.GetLeader()] = true
	}
	for _, m := range due {
		if holders[m.Identity] {
			continue
		}
		l.reaped[m.Identity] = m.Version
		l.reapers.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, s.config.RenewDeadline)
			defer cancel()
			if err := s.members.Expire(rctx, m.Identity, m.Version); err != nil && ctx.Err() == nil {
				s.logger.Warn("deleting an expired member lease failed", "member", m.Identity, "error", err)
				return
			}
			s.logger.Debug("expired member lease deleted, unless written since", "member", m.Identity)
		})
	}
}

// stopFollows ends every follow of followDeaths and waits for their goroutines.
func (l *loop) stopFollows() {
	for inc, stop := range l.follows {
		stop()
		delete(l.follows, inc)
	}
	l.followers.Wait()
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// handOverWaves is how many waves a rebalance's hand-overs go out in, at most: a
// rebalance moving k shards keeps ceil(k/handOverWaves) hand-overs under way at once.
//
// Why not all at once: every hand-over is a Lease write (two in a row to a member that
// takes no hand-off: the release, then the new owner's take), and a burst of writes
// makes each of them as slow as the whole burst (the API server and etcd work through
// it, and answer it together). A shard is ownerless only from its old term's end to
// its new term's start, while one still waiting for its turn keeps its owner; so
// small waves keep each shard's ownerless window near single writes instead of
// bursts. On a loaded 2-core machine, handing a
// rebalance's shards over one at a time instead of all at once cut the median
// ownerless window in test/sharding's BenchmarkShardMoves from ~65ms to ~27ms on a
// join and from ~66ms to ~14ms on a leave, and the join balanced no later. Waves, not
// one at a time, bound the rebalance of a large ring to handOverWaves release round
// trips.
const handOverWaves = 16

// rebalance hands each shard this replica leads but placement gives to another member
// over to that member, unless one is under way. The hand-overs go out in shard order,
// ceil(k/handOverWaves) at a time, each in its ring-wide turn (turns.go) once an
// earlier one's release was written.
func (l *loop) rebalance(ctx context.Context) {
	s := l.s
	var moves []int
	s.mu.Lock()
	for shard := range s.owned {
		target := s.placement.Owner(shard)
		if target != "" && target != s.config.Identity && !s.handingOver[shard] {
			s.handingOver[shard] = true
			moves = append(moves, shard)
		}
	}
	s.mu.Unlock()
	if len(moves) == 0 {
		return
	}
	slices.Sort(moves) // the same order every run
	queue := make(chan int, len(moves))
	for _, shard := range moves {
		queue <- shard
	}
	close(queue)
	for range (len(moves) + handOverWaves - 1) / handOverWaves {
		l.handovers.Go(func() {
			for shard := range queue {
				l.handOverNow(ctx, shard)
			}
		})
	}
}

// handOverNow hands shard over to its owner in the placement now, which may have
// changed while it waited for its turn; it drops the move when ctx ended (leave hands
// the shard over again), the shard is no longer led here, or placement gives it to
// this replica again, and, until this replica leaves, when the owner is unvouched
// (docs/design/sharding.md, # Hand-over targets). A leaving replica hands a shard to an
// unvouched owner all the same: the shard cannot stay here, and the others, whose
// placement gives it to that owner as long as they count it live, would wait for
// that owner as long after the release of its stop as after the hand-over, while
// that release would go out with all the others at once.
func (l *loop) handOverNow(ctx context.Context, shard int) {
	s := l.s
	l.awaitTurn(ctx, shard)
	s.mu.Lock()
	target := s.placement.Owner(shard)
	_, owned := s.owned[shard]
	if ctx.Err() != nil || !owned || target == "" || target == s.config.Identity || withholdsOwn(s.unvouched, s.leaving, target) {
		delete(s.handingOver, shard)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	l.handOver(ctx, shard, target)
}

// withholdsOwn reports whether this replica withholds its hand-overs to target: target
// is unvouched here (seen only on this replica's first view of the members, unwritten
// since) and this replica is not leaving (docs/design/sharding.md, # Hand-over targets).
func withholdsOwn(unvouched []string, leaving bool, target string) bool {
	_, no := slices.BinarySearch(unvouched, target)
	return no && !leaving
}

// handOver hands shard to target. A failed hand-over may be tried again after a
// RetryPeriod.
func (l *loop) handOver(ctx context.Context, shard int, target string) {
	s := l.s
	s.ownerless.handingOver(shard, s.clock.Now())
	err := s.electors[shard].HandOver(ctx, target)
	s.ownerless.handedOver(shard, s.clock.Now(), err == nil)
	done := func() {
		s.mu.Lock()
		delete(s.handingOver, shard)
		s.mu.Unlock()
		s.kick()
	}
	if err != nil {
		s.handOverFailures.Add(1)
		s.logger.Info("hand-over failed", "shard", shard, "to", target, "error", err)
		s.clock.AfterFunc(s.config.RetryPeriod, done)
		return
	}
	s.handOvers.Add(1)
	s.logger.Debug("handed over", "shard", shard, "to", target)
	done()
}

// leave is step 5 of Run.
func (l *loop) leave(ctx context.Context) {
	s := l.s
	stopSigns := l.followSigns()
	defer stopSigns()
	now := s.clock.Now()
	s.mu.Lock()
	s.leaving = true
	s.mu.Unlock()
	l.replace(now)
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.config.LeaseDuration)
	defer cancel()
	// Leaving: the others stop placing shards here at once; the Lease itself stays
	// until every shard term here ended (depart).
	sent, claimed := s.clock.Now(), s.ownedShards()
	if _, err := s.members.Renew(lctx, s.memberLease(MemberLeaving, claimed)); err != nil {
		s.logger.Warn("marking member lease leaving failed", "error", err)
	} else {
		s.setRenewed(sent)
		s.livenessRenewed(sent, claimed) // the hand-overs below have RenewDeadline from here
	}
	l.handovers.Wait() // the moves of run's last rebalance not yet begun are dropped: hand them over here
	l.rebalance(lctx)
	l.handovers.Wait()
	l.linger(lctx, sent)
	l.rebalance(lctx)
	l.handovers.Wait()
	s.logger.Info("left", "stillLeading", len(s.Owned()))
}

// linger waits, when the ring has other members, until SettleDelay after the leaving
// mark sent at sent, or ctx ends: a member that had not seen the mark yet may have
// handed a shard here in one write (leaderelection.HandOffs), landing after this
// replica's hand-overs. The electors, still running, take it, and the rebalance
// after linger passes it on, so that none is left naming this replica once they
// stop.
func (l *loop) linger(ctx context.Context, sent time.Time) {
	s := l.s
	wait := sent.Add(s.config.SettleDelay).Sub(s.clock.Now())
	if wait <= 0 || !s.signs.others(s.config.Identity) {
		return
	}
	done := make(chan struct{})
	t := s.clock.AfterFunc(wait, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// followSigns keeps the member signs fed from the member watch while this replica
// leaves, its placement staying as it was: a hand-off (leaderelection.HandOffs) then
// sees another member's leaving mark, which does not take it. It returns the
// function that stops it and closes the watch.
func (l *loop) followSigns() (stop func()) {
	if l.events == nil {
		l.closeWatch()
		return func() {}
	}
	events, done := l.events, make(chan struct{})
	go func() {
		defer close(done)
		for ev := range events { // until the store closes it
			if ev.Err == nil {
				l.s.signs.observe(l.s.clock.Now(), ev.Members)
			}
		}
	}()
	return func() {
		l.stopWatch()
		<-done
		l.events, l.opening, l.stopWatch = nil, nil, nil
	}
}

// depart deletes this replica's member Lease, once its shard terms ended.
func (l *loop) depart(ctx context.Context) {
	s := l.s
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.config.RenewDeadline)
	defer cancel()
	if err := s.members.Leave(lctx, s.config.Identity); err != nil {
		s.logger.Warn("deleting member lease failed", "error", err)
	}
}

// admissionAt is when Run's loop must look at the admission again: when its member
// Lease's renew deadline passes while admitted, or when a waiting replica may try
// again; far ahead when neither.
func (l *loop) admissionAt(now time.Time) time.Time {
	s := l.s
	s.mu.Lock()
	admitted, until := s.admitted, s.renewedUntilLocked()
	s.mu.Unlock()
	switch {
	case admitted:
		return until
	case l.want == MemberWaiting && l.retryActiveAt.After(now):
		return l.retryActiveAt
	}
	return now.Add(time.Hour)
}

// notePlaced tells the ownerless measure which shards placement now gives this
// replica, and which of them it gives because their owner in the previous placement
// went (no longer live at all: expired or proven dead, not leaving).
func (l *loop) notePlaced(now time.Time, prev, next Placement) {
	s := l.s
	liveIDs := map[string]bool{}
	for _, m := range l.liveness.live(now) {
		liveIDs[m.Identity] = true
	}
	mine := map[int]bool{}
	var fromGone []int
	for _, shard := range next.Shards(s.config.Identity) {
		mine[shard] = true
		if was := prev.Owner(shard); was != "" && was != s.config.Identity && !liveIDs[was] {
			fromGone = append(fromGone, shard)
		}
	}
	s.ownerless.placed(now, mine, fromGone)
}

// memberLease is this replica's member Lease in state, claiming the terms of the
// shards claimed.
func (s *Sharder) memberLease(state MemberState, claimed []int) MemberLease {
	return MemberLease{Identity: s.config.Identity, LeaseDuration: s.config.LeaseDuration, Shape: s.shape(), State: state,
		Incarnation: s.incarnation, Shards: formatShards(claimed), HandOffs: true}
}
