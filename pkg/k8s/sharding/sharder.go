package sharding

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/termctx"
)

// DefaultSettleDelay is the default of Config.SettleDelay.
const DefaultSettleDelay = 200 * time.Millisecond

// Config configures a Sharder. Zero durations take the defaults written on each field.
type Config struct {
	// Identity names this replica: in its member Lease and as the holder of the shard
	// Leases it leads. Required; unique among the replicas (a pod name). The member
	// Lease name "<Name>-member-<Identity>" must be a DNS-1123 subdomain (lowercase
	// letters, digits, '-' and '.', at most 253 characters): New refuses it otherwise.
	Identity string
	// Name names the ring: its shard Leases are "<Name>-shard-<i>", its member Leases
	// "<Name>-member-<identity>", labelled RingLabel=<Name>. Required; every replica
	// of a ring uses the same. New refuses a Name that makes a Lease name the API
	// server would refuse (not a DNS-1123 subdomain: capitals, '_') or that is not a
	// label value (over 63 characters).
	Name string
	// Namespace is the namespace of the ring's Leases. Required; a DNS-1123 label.
	Namespace string
	// Shards is the number of shards S, from 1 to MaxShards; 0 means DefaultShards
	// (64). Every replica of a ring must use the same, for the life of the ring.
	Shards int
	// LeaseDuration, RenewDeadline and RetryPeriod are the timing of every shard's
	// election, as leaderelection.Config's (defaults 15s, 10s, 2s, the same bounds), and
	// of the member Leases: a replica renews its member Lease every RetryPeriod, and the
	// others count it live until LeaseDuration after they last saw it renewed.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// SettleDelay is how long a replica waits after the members or its shards last
	// changed before it hands over the shards placement gives to others (default
	// DefaultSettleDelay, 200ms): a burst of joins moves each shard once, and a replica
	// that took a shard while its view of the members lagged does not hand it on before
	// its view caught up. From 0 to RetryPeriod.
	SettleDelay time.Duration
	// Clock is the time source of the shard electors and of the member Leases' expiry;
	// nil is the real clock. For tests and fault injection.
	Clock leaderelection.Clock
	// JitterSource, when set, gives each shard's elector its random source of retry
	// jitter (leaderelection.Config.JitterSource): it is called once per shard by
	// New, and must return a source of its own each time. With Clock and seeded
	// sources, a ring's histories replay (up to the order of goroutines at one
	// instant). nil is math/rand/v2's global source.
	JitterSource func(shard int) rand.Source
	// Incarnation and DeathWatch turn the death signal on for every shard's elector
	// (leaderelection.Config.Incarnation and DeathWatch; see pkg/k8s/incarnation):
	// each records this run's incarnation in the shard Leases it takes, and follows
	// the death of each shard's holder. When a holder is proven dead, this replica
	// counts that member gone at once (until its member Lease is written again) and
	// the shards' new owners take them at once, instead of a LeaseDuration after the
	// crash. The electors share one DeathWatch call per holder's incarnation, not one
	// per shard (for pkg/k8s/incarnation's Watcher, one pod watch). Both empty: off.
	Incarnation string
	DeathWatch  leaderelection.DeathWatch
}

// Callbacks are called by a running Sharder. Both are optional.
type Callbacks struct {
	// OnAcquired runs when this replica starts leading a shard, on that shard's own
	// goroutine (calls for one shard never overlap; calls for different shards run at
	// once). ctx is the shard's term context: termctx.Get(ctx) gives the shard
	// and its term, and ctx ends when the term does (handed over, lost, or Run's
	// shutdown). It may return at once or run the shard's work until ctx ends; the
	// shard is handed over only after it returned, so it must return soon after ctx
	// ends.
	OnAcquired func(ctx context.Context)
	// OnLost runs exactly once after every term that OnAcquired was called for, after
	// its ctx ended (it may run while OnAcquired still runs).
	OnLost func(t ShardTerm)
}

// Stores are where a Sharder keeps its Leases.
type Stores struct {
	// Shard returns the store of shard i's Lease; it is called once per shard by New.
	Shard func(shard int) leaderelection.LeaseStore
	// Members is the store of the ring's member Leases.
	Members MemberStore
}

// NewMemoryStores returns in-memory stores of a ring of shards shards, to share
// between the replicas of one process (tests, demos).
func NewMemoryStores(shards int) Stores {
	leases := make([]*leaderelection.MemoryStore, shards)
	for i := range leases {
		leases[i] = leaderelection.NewMemoryStore(fmt.Sprint("shard-", i))
	}
	return Stores{
		Shard: func(i int) leaderelection.LeaseStore {
			if i < 0 || i >= len(leases) {
				return nil
			}
			return leases[i]
		},
		Members: NewMemoryMembers(),
	}
}

// Sharder runs one replica's part of a ring: its member Lease, and one elector per
// shard, each following its shard's Lease and campaigning only while placement gives
// this replica the shard. Create it with New or NewWithStores; run it
// with Run. Its methods are safe for concurrent use.
type Sharder struct {
	config    Config
	ring      Ring
	members   MemberStore
	callbacks Callbacks
	logger    *slog.Logger
	clock     leaderelection.Clock
	electors  []*leaderelection.Elector
	// incarnation names this run on its member Lease and the shard Leases it takes
	// (Config.Incarnation, or a random name); signs is the shard electors' liveness
	// of the holders, kept on their member Leases (docs/design/sharding-renewal.md).
	incarnation string
	signs       *memberSigns
	started     atomic.Bool
	// Counters of Stats.
	handOvers, handOverFailures, outOfRange, shapeRefusals, acquisitions atomic.Uint64
	ownerless                                                            *ownerless
	// kicks wakes Run's loop when a shard was acquired or a hand-over finished;
	// deathKicks when a holder was proven dead. Room for one, so that a kick never
	// blocks.
	kicks, deathKicks chan struct{}
	// deaths is the electors' shared DeathWatch, which Run's loop also follows the
	// members with (followDeaths); nil without Config.DeathWatch.
	deaths *sharedDeaths
	// moved tells the hand-overs waiting for their turn (turns.go) that a shard's
	// holder or the placement changed.
	moved *moveSignal

	// mu guards the fields below.
	mu          sync.Mutex
	live        []string                // the members this replica sees live, itself included while running; sorted
	unvouched   []string                // members seen only on this replica's first look at the members (liveness.unvouched)
	writes      map[string]memberWrites // the members' lease writes as Run's loop last saw them (liveness.writes); replaced whole, never changed
	placement   Placement               // Place over live
	leaving     bool                    // Run's context ended: campaign for nothing, hand everything over
	owned       map[int]uint64          // the shards this replica leads, with their terms
	accepted    map[int]bool            // the shards whose hand-off term was accepted (acceptHandOff) and has not ended
	handingOver map[int]bool            // shards with a hand-over under way
	dead        []deadMember            // members proven dead, not yet taken by Run's loop
	admitted    bool                    // may campaign: no member of another shape was active when it joined (shape.go)
	renewedAt   time.Time               // when the last write of its member Lease that succeeded was sent
	refusing    bool                    // refused to campaign for a member of another shape, not admitted since
	mismatched  []string                // live members of another shape, as Run's loop last saw them
}

// NewWithStores returns a Sharder for config's ring on stores (NewMemoryStores, or any). It returns an error wrapping
// ErrInvalidConfig naming each bad field. A nil logger discards logs.
func NewWithStores(config Config, stores Stores, callbacks Callbacks, logger *slog.Logger) (*Sharder, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	config, ring, err := config.check(stores)
	if err != nil {
		return nil, err
	}
	s := &Sharder{
		config:      config,
		ring:        ring,
		members:     stores.Members,
		callbacks:   callbacks,
		logger:      logger.With("ring", config.Name, "identity", config.Identity),
		clock:       config.Clock,
		kicks:       make(chan struct{}, 1),
		deathKicks:  make(chan struct{}, 1),
		owned:       map[int]uint64{},
		accepted:    map[int]bool{},
		handingOver: map[int]bool{},
		ownerless:   newOwnerless(),
		moved:       newMoveSignal(),
	}
	if s.clock == nil {
		s.clock = realClock{}
	}
	s.incarnation = config.Incarnation
	if s.incarnation == "" {
		s.incarnation = randomIncarnation()
	}
	s.signs = newMemberSigns(s.clock, stores.Members, ring.Shards(), config.LeaseDuration)
	var deaths leaderelection.DeathWatch // nil, not a nil *sharedDeaths, without one
	if config.DeathWatch != nil {
		s.deaths = newSharedDeaths(config.DeathWatch)
		deaths = s.deaths
	}
	for i := range ring.Shards() {
		store := stores.Shard(i)
		if store == nil {
			return nil, fmt.Errorf("%w: Stores.Shard(%d) is nil", ErrInvalidConfig, i)
		}
		var jitter rand.Source
		if config.JitterSource != nil {
			jitter = config.JitterSource(i)
		}
		e, err := leaderelection.NewWithStore(leaderelection.Config{
			Identity:        config.Identity,
			LeaseName:       ShardLeaseName(config.Name, i),
			LeaseNamespace:  config.Namespace,
			LeaseDuration:   config.LeaseDuration,
			RenewDeadline:   config.RenewDeadline,
			RetryPeriod:     config.RetryPeriod,
			ReleaseOnCancel: true,
			Clock:           config.Clock,
			JitterSource:    jitter,
			Incarnation:     s.incarnation,
			DeathWatch:      deaths,
			FollowOnly:      true, // until placement gives this replica the shard (place)
			Liveness: shardLiveness{m: s.signs, shard: i, gone: s.candidateGone,
				handOffTo: s.handOffTarget, accept: s.acceptHandOff},
		}, store, leaderelection.Callbacks{
			OnStartedLeading: func(ctx context.Context) { s.leading(ctx, i) },
			OnStoppedLeading: func() { s.notLeading(i) },
			OnHolderDead:     s.holderDead,
			OnNewLeader: func(string) {
				now := s.clock.Now()
				s.ownerless.newHolder(i, now, config.LeaseDuration)
				s.moved.notify(now)
			},
		}, logger.With("ring", config.Name, "shard", i))
		if err != nil {
			// A field the elector checks (Incarnation): the same for every shard.
			return nil, electorConfigError(err)
		}
		s.electors = append(s.electors, e)
	}
	return s, nil
}

// check returns config with its defaults filled in and its ring, or an error
// wrapping ErrInvalidConfig naming each bad field.
func (config Config) check(stores Stores) (Config, Ring, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...)))
	}
	if config.Identity == "" {
		bad("Identity", "empty")
	}
	if config.Name == "" {
		bad("Name", "empty")
	}
	if config.Namespace == "" {
		bad("Namespace", "empty")
	}
	ring, err := NewRing(config.Shards)
	if err != nil {
		bad("Shards", "%d is not from 1 to %d", config.Shards, MaxShards)
	}
	config.Shards = ring.Shards()
	errs = append(errs, config.checkNames()...)
	config.LeaseDuration = orDefault(config.LeaseDuration, leaderelection.DefaultLeaseDuration)
	config.RenewDeadline = orDefault(config.RenewDeadline, leaderelection.DefaultRenewDeadline)
	config.RetryPeriod = orDefault(config.RetryPeriod, leaderelection.DefaultRetryPeriod)
	if err := leaderelection.CheckDurations(config.LeaseDuration, config.RenewDeadline, config.RetryPeriod); err != nil {
		errs = append(errs, electorConfigError(err))
	}
	switch {
	case config.SettleDelay == 0:
		config.SettleDelay = DefaultSettleDelay
	case config.SettleDelay < 0 || config.SettleDelay > config.RetryPeriod:
		bad("SettleDelay", "%v is not from 0 to RetryPeriod (%v)", config.SettleDelay, config.RetryPeriod)
	}
	if stores.Shard == nil {
		bad("Stores.Shard", "nil")
	}
	if stores.Members == nil {
		bad("Stores.Members", "nil")
	}
	return config, ring, errors.Join(errs...)
}

// electorConfigError returns err, an error of the elector's configuration, as this
// package's: each leaderelection.ConfigError as an error wrapping ErrInvalidConfig
// that names its field.
func electorConfigError(err error) error {
	var errs []error
	for _, e := range leaderelection.ConfigErrors(err) {
		var ce *leaderelection.ConfigError
		if errors.As(e, &ce) {
			errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, ce.Field, ce.Reason))
		} else {
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, e))
		}
	}
	return errors.Join(errs...)
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// ResignShard ends this replica's term t of shard t.Shard early, if it leads that
// term now, as Elector.Resign does for one shard: the shard's Lease is released,
// and this replica does not campaign for the shard again for a LeaseDuration. It
// reports whether it ended the term. It is meant for WorkConfig.StepDown; safe from
// any goroutine, it never blocks.
func (s *Sharder) ResignShard(t ShardTerm) bool {
	if t.Shard < 0 || t.Shard >= len(s.electors) {
		return false
	}
	return s.electors[t.Shard].Resign(t.Term)
}

// ShardStats returns the counters of shard's elector (its death takeovers and
// hand-overs among them), and false when shard is not in the ring.
func (s *Sharder) ShardStats(shard int) (leaderelection.Stats, bool) {
	if shard < 0 || shard >= len(s.electors) {
		return leaderelection.Stats{}, false
	}
	return s.electors[shard].Stats(), true
}

// LastMove returns when this replica last saw the ring move, by its Config.Clock: a
// shard Lease changing holder (any replica's shard, seen on the Lease watch) or its
// placement changing; zero before either. A ring moves in bursts (a join, a leave, a
// rolling restart), one hand-over after another, each waiting for the write of the
// last (see turns.go): work that may wait, like Events, can keep out of them.
func (s *Sharder) LastMove() time.Time { return s.moved.lastChange() }

// Ring returns the sharder's ring.
func (s *Sharder) Ring() Ring { return s.ring }

// Identity returns the configured identity.
func (s *Sharder) Identity() string { return s.config.Identity }

// Owned returns the shards this replica leads now, with their terms, in shard order.
func (s *Sharder) Owned() []ShardTerm {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ShardTerm, 0, len(s.owned))
	for shard, term := range s.owned {
		out = append(out, ShardTerm{Shard: shard, Term: term})
	}
	slices.SortFunc(out, func(a, b ShardTerm) int { return a.Shard - b.Shard })
	return out
}

// Assigned returns the shards placement gives this replica in its current view of
// the members (those it campaigns for), in order.
func (s *Sharder) Assigned() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.placement.Shards(s.config.Identity)
}

// Members returns the members placement counts in this replica's view: the live
// active members of its ring shape, itself included while it runs, is admitted (see
// docs/design/sharding.md, # Ring shape) and has not begun to leave, sorted.
func (s *Sharder) Members() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.live)
}

// Refusing reports whether this replica refuses to campaign because members of
// another ring shape (another Shards) are active: it leads no shard until they are
// gone. A replica in this state should report not ready.
func (s *Sharder) Refusing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusing
}

// Mismatched returns the live members of another ring shape this replica sees,
// sorted: non-empty means the ring's replicas disagree on Shards.
func (s *Sharder) Mismatched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mismatched)
}

// Stats are counters of a Sharder since it was created, for metrics and tests.
type Stats struct {
	// Acquisitions counts the shard terms this replica started: shards moved to it.
	Acquisitions uint64
	// HandOvers counts the shards this replica handed over to their owner in
	// placement: one Lease write each when it named the owner holder (a hand-off:
	// leaderelection.HandOffs), two otherwise (its release, the owner's takeover).
	HandOvers uint64
	// HandedOff counts the shard terms this replica started on a hand-off to it,
	// without a write of its own (the sum of the shard electors'
	// leaderelection.Stats.HandedOffTerms).
	HandedOff uint64
	// HandOverFailures counts the hand-overs that failed (the term had ended, the
	// Lease was taken, a write failed); each is tried again after a RetryPeriod if the
	// shard is still led here.
	HandOverFailures uint64
	// DeathTakeovers counts the shard terms this replica started on a proof that the
	// holder's container terminated (the sum of the shard electors'
	// leaderelection.Stats.DeathTakeovers).
	DeathTakeovers uint64
	// OutOfRange counts the values read from the ring's Leases outside the range Baton
	// writes, each logged at WARN once per record: a member Lease's leaseDurationSeconds
	// above leaderelection.MaxLeaseDuration (taken as it) or negative (taken as
	// LeaseDuration), plus the shard electors' leaderelection.Stats.OutOfRange.
	OutOfRange uint64
	// ShapeRefusals counts the times this replica refused to campaign because members
	// of another ring shape were active (see docs/design/sharding.md, # Ring shape).
	ShapeRefusals uint64
}

// Stats returns the sharder's counters.
func (s *Sharder) Stats() Stats {
	st := Stats{HandOvers: s.handOvers.Load(), HandOverFailures: s.handOverFailures.Load(), OutOfRange: s.outOfRange.Load(),
		ShapeRefusals: s.shapeRefusals.Load(), Acquisitions: s.acquisitions.Load()}
	for _, e := range s.electors {
		es := e.Stats()
		st.DeathTakeovers += es.DeathTakeovers
		st.HandedOff += es.HandedOffTerms
		st.OutOfRange += es.OutOfRange
	}
	return st
}

// place lets the electors of the shards placement gives this replica campaign, and
// makes the others follow only; with leaving, all follow only.
func (s *Sharder) place(placement Placement, leaving bool) {
	for i, e := range s.electors {
		e.SetCampaigning(!leaving && placement.Owner(i) == s.config.Identity)
	}
}

// deadMember is a member proven dead: identity, and the incarnation whose death was
// proven ("" for whichever run of identity Run's loop last saw).
type deadMember struct{ identity, incarnation string }

// holderDead is every shard elector's OnHolderDead: Run's loop counts the member
// gone (deaths).
func (s *Sharder) holderDead(identity string) { s.memberDead(identity, "") }

// memberDead has Run's loop count identity gone, if the run it last saw of identity
// is incarnation (any run when incarnation is "").
func (s *Sharder) memberDead(identity, incarnation string) {
	if identity == s.config.Identity {
		return // an earlier run of this replica's identity: this one is live
	}
	s.mu.Lock()
	s.dead = append(s.dead, deadMember{identity, incarnation})
	s.mu.Unlock()
	select {
	case s.deathKicks <- struct{}{}:
	default:
	}
}

// candidateGone is the shard electors' Liveness.Gone: candidate, named by a
// hand-over, is neither this replica nor a member its placement counts (its member
// Lease expired, was deleted, says leaving or waiting, or it was proven dead). A
// shard handed to such a member is taken at once by its owner in this replica's
// placement, instead of a LeaseDuration after the release: a member that left or
// died after a hand-over to it was decided takes nothing (docs/design/sharding.md,
// # Hand-over targets).
func (s *Sharder) candidateGone(candidate string) bool {
	if candidate == s.config.Identity {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, counted := slices.BinarySearch(s.live, candidate)
	return !counted
}

// handOffTarget reports whether a hand-over to candidate may name it holder
// (leaderelection.HandOffs): another member that placement counts and that this
// replica saw write its member Lease while it watched.
func (s *Sharder) handOffTarget(candidate string) bool {
	if candidate == s.config.Identity {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, counted := slices.BinarySearch(s.live, candidate)
	_, unvouched := slices.BinarySearch(s.unvouched, candidate)
	return counted && !unvouched
}

// recheck tells every shard elector that the members placement counts changed, so
// that it looks again at a hand-over to a member that went (candidateGone).
func (s *Sharder) recheck() {
	for _, e := range s.electors {
		e.LivenessChanged()
	}
}

// setWrites records the members' lease writes as Run's loop saw them last.
func (s *Sharder) setWrites(w map[string]memberWrites) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = w
}

// setUnvouched records the members seen only on this replica's first look at the
// members, sorted (no shard is handed to them); it reports whether the set changed.
func (s *Sharder) setUnvouched(ids []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(ids, s.unvouched) {
		return false
	}
	s.unvouched = ids
	return true
}

// takeDead returns the members proven dead since the last call.
func (s *Sharder) takeDead() []deadMember {
	s.mu.Lock()
	defer s.mu.Unlock()
	dead := s.dead
	s.dead = nil
	return dead
}

// leading is shard's OnStartedLeading. A replica not admitted, or whose admission
// lapsed (mayLeadLocked), resigns at once: it may not lead, even a shard handed over
// to it.
func (s *Sharder) leading(ctx context.Context, shard int) {
	ctx = withShard(ctx, shard, s.ring.Shards())
	term, _ := termctx.FromContext(ctx)
	now := s.clock.Now()
	s.mu.Lock()
	may := s.mayLeadLocked(now)
	if may {
		s.owned[shard] = term
	}
	s.mu.Unlock()
	if !may {
		s.logger.Warn("resigning a shard taken while not admitted", "shard", shard, "term", term)
		s.electors[shard].Resign(term)
		return
	}
	s.acquisitions.Add(1)
	s.ownerless.acquired(shard, now)
	s.kick()
	if f := s.callbacks.OnAcquired; f != nil {
		f(ctx)
	}
}

// notLeading is shard's OnStoppedLeading.
func (s *Sharder) notLeading(shard int) {
	s.mu.Lock()
	term, ok := s.owned[shard]
	delete(s.owned, shard)
	delete(s.accepted, shard)
	s.mu.Unlock()
	t := ShardTerm{Shard: shard, Term: term}
	if f := s.callbacks.OnLost; f != nil && ok { // not for a term resigned at once (leading)
		f(t)
	}
}

func (s *Sharder) kick() {
	select {
	case s.kicks <- struct{}{}:
	default:
	}
}

// realClock is the Clock of the runtime.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) leaderelection.Timer {
	return time.AfterFunc(d, f)
}

// randomIncarnation names a run of a replica that was given no Config.Incarnation:
// 16 random bytes, so that no other run of any replica ever uses it.
func randomIncarnation() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // crypto/rand's Read never fails
	return "run-" + hex.EncodeToString(b[:])
}

// shape is the ring shape this replica records on its member Lease: the ring's
// (Ring.Shape) and the renewal of its shard terms (by the member Lease, see
// docs/design/sharding-renewal.md), so that replicas of a version that renews every
// shard Lease, which would take a shard a LeaseDuration after its Lease last changed,
// never lead shards beside this one's (docs/design/sharding.md, # Ring shape).
func (s *Sharder) shape() string { return s.ring.Shape() + shapeRenewal }

// shapeRenewal is the part of a replica's shape that names its renewal of shard terms.
const shapeRenewal = "/member-renewal"

// livenessRenewed tells the electors of the shards a member Lease write sent at sent
// claimed that it succeeded: the terms it claimed last RenewDeadline from sent.
func (s *Sharder) livenessRenewed(sent time.Time, claimed []int) {
	for _, shard := range claimed {
		s.electors[shard].LivenessRenewed(sent)
	}
}

// ownedShards returns the shards this replica leads now, sorted: what a member Lease
// write claims.
func (s *Sharder) ownedShards() []int {
	s.mu.Lock()
	out := make([]int, 0, len(s.owned)+len(s.accepted))
	for shard := range s.owned {
		out = append(out, shard)
	}
	for shard := range s.accepted {
		if _, ok := s.owned[shard]; !ok {
			out = append(out, shard)
		}
	}
	s.mu.Unlock()
	slices.Sort(out)
	return out
}

// acceptHandOff reports whether shard's elector may start the term of a one-write
// hand-over to this replica (leaderelection.HandOffs.Accept): not once it leaves, and
// only while admitted (mayLeadLocked). An accepted shard counts as led (ownedShards:
// the member Lease's next writes claim it) until its term ends, so that the leaving
// mark claims every hand-off term begun before it, and none begins after it.
func (s *Sharder) acceptHandOff(shard int) bool {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leaving || !s.mayLeadLocked(now) {
		return false
	}
	s.accepted[shard] = true
	return true
}
