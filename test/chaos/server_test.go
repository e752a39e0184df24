package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection/leaderelectiontest"
)

// errAPIDown is what every call gets while the in-memory API server restarts.
var errAPIDown = errors.New("chaos: api server unavailable (restarting)")

// Writers the server records for writes no candidate made.
const (
	writerRestore = "(restore)"
	writerDelete  = "(delete)"
)

// memServer is the API server of in-memory histories: a leaderelection.MemoryStore
// behind a resourceVersion translation, so that restoring an older snapshot moves
// resourceVersions back as an etcd restore from a backup does (later writes reuse the
// numbers). It records which candidate incarnation wrote the current state, and can
// drop every watch, delete the lease, restore a snapshot and refuse calls for a while
// (a restart). Safe for concurrent use.
type memServer struct {
	inner *leaderelection.MemoryStore

	// mu guards the fields below and is held across each call of inner, so that a
	// write and the writer recorded for it are one step. MemoryStore never blocks
	// while holding its own lock (watchers have a one-event buffer), so this lock is
	// never held long.
	mu        sync.Mutex
	epochs    []epoch    // by from, ascending; epochs[0] is {0, 0}
	snapshots []snapshot // states after recent writes, oldest first
	writer    string     // incarnation that wrote the current state
	exists    bool
	downUntil time.Time
	watches   map[*serverWatch]struct{}
	// afterCreate, when set, is called once, by the next Create that lands
	// (deleteAfterNextCreate).
	afterCreate func()
	// installed is when the current state was written, restored or deleted.
	installed time.Time
	// takeovers are the writes that took the lease from another holder.
	takeovers []takeover
}

// takeover is a write by writer that replaced prev, a state held by another identity
// written at prevAt, with rec, held by writer's identity.
type takeover struct {
	writer     string
	at         time.Time
	prev       leaderelection.LeaseRecord
	prevAt     time.Time
	prevWriter string // who wrote prev
	rec        leaderelection.LeaseRecord
}

// epoch maps the underlying versions from `from` on to presented = underlying - offset.
type epoch struct {
	from   uint64
	offset uint64
}

// snapshot is one state of the lease, with its presented resourceVersion.
type snapshot struct {
	record leaderelection.LeaseRecord
	writer string
}

// serverWatch is one watch the server can break.
type serverWatch struct{ cancel context.CancelFunc }

func newMemServer(name string) *memServer {
	return &memServer{
		inner:   leaderelection.NewMemoryStore(name),
		epochs:  []epoch{{}},
		watches: make(map[*serverWatch]struct{}),
	}
}

// presentLocked translates an underlying resourceVersion into the presented one.
func (s *memServer) presentLocked(rv string) string {
	u, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return rv
	}
	for i := len(s.epochs) - 1; i >= 0; i-- {
		if e := s.epochs[i]; u >= e.from {
			return strconv.FormatUint(u-e.offset, 10)
		}
	}
	return rv
}

// underlyingLocked translates a presented resourceVersion for a compare-and-swap.
// A version from before a restore may map onto a later write: as with etcd, a stale
// version can match again after a restore.
func (s *memServer) underlyingLocked(rv string) string {
	p, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return rv
	}
	return strconv.FormatUint(p+s.epochs[len(s.epochs)-1].offset, 10)
}

func (s *memServer) checkUpLocked() error {
	if time.Now().Before(s.downUntil) {
		return errAPIDown
	}
	return nil
}

// as returns the LeaseStore of one candidate incarnation: writes through it are
// recorded as that incarnation's.
func (s *memServer) as(writer string) leaderelection.LeaseStore {
	return &serverView{s: s, writer: writer}
}

func (s *memServer) get(ctx context.Context) (leaderelection.LeaseRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkUpLocked(); err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	r, err := s.inner.Get(ctx)
	r.ResourceVersion = s.presentLocked(r.ResourceVersion)
	return r, err
}

func (s *memServer) write(ctx context.Context, r leaderelection.LeaseRecord, writer string, create bool) (leaderelection.LeaseRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkUpLocked(); err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	var out leaderelection.LeaseRecord
	var err error
	if create {
		out, err = s.inner.Create(ctx, r)
	} else {
		prev, perr := s.inner.Get(ctx)
		prevAt, prevWriter := s.installed, s.writer
		r.ResourceVersion = s.underlyingLocked(r.ResourceVersion)
		out, err = s.inner.Update(ctx, r)
		id, _, _ := strings.Cut(writer, "#")
		if err == nil && perr == nil && prev.HolderIdentity != "" && prev.HolderIdentity != id && out.HolderIdentity == id {
			prev.ResourceVersion = s.presentLocked(prev.ResourceVersion)
			rec := out
			rec.ResourceVersion = s.presentLocked(rec.ResourceVersion)
			s.takeovers = append(s.takeovers, takeover{writer: writer, at: time.Now(), prev: prev, prevAt: prevAt, prevWriter: prevWriter, rec: rec})
		}
	}
	if err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	out.ResourceVersion = s.presentLocked(out.ResourceVersion)
	s.recordLocked(out, writer)
	if f := s.afterCreate; create && f != nil {
		s.afterCreate = nil
		f()
	}
	return out, nil
}

// deleteAfterNextCreate deletes the lease by hand d after the next Create lands (if it
// is still there), and then calls deleted.
func (s *memServer) deleteAfterNextCreate(d time.Duration, deleted func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afterCreate = func() {
		time.AfterFunc(d, func() {
			if s.deleteLease() {
				deleted()
			}
		})
	}
}

func (s *memServer) recordLocked(r leaderelection.LeaseRecord, writer string) {
	s.writer, s.exists, s.installed = writer, true, time.Now()
	s.snapshots = append(s.snapshots, snapshot{record: r, writer: writer})
	if len(s.snapshots) > 64 {
		s.snapshots = s.snapshots[len(s.snapshots)-64:]
	}
}

// watch opens a watch of the inner store whose events carry presented versions. It is
// closed when ctx ends or the server breaks its watches.
func (s *memServer) watch(ctx context.Context) (<-chan leaderelection.LeaseEvent, error) {
	s.mu.Lock()
	if err := s.checkUpLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	in, err := s.inner.Watch(wctx)
	if err != nil {
		s.mu.Unlock()
		cancel()
		return nil, err
	}
	w := &serverWatch{cancel: cancel}
	s.watches[w] = struct{}{}
	s.mu.Unlock()
	out := make(chan leaderelection.LeaseEvent)
	go func() {
		defer close(out)
		defer func() {
			cancel()
			s.mu.Lock()
			delete(s.watches, w)
			s.mu.Unlock()
		}()
		for ev := range in {
			s.mu.Lock()
			ev.Record.ResourceVersion = s.presentLocked(ev.Record.ResourceVersion)
			s.mu.Unlock()
			if wctx.Err() != nil {
				return // broken at the instant of the event: never delivered (a seed replays)
			}
			select {
			case out <- ev:
			case <-wctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// takeoverLog returns the writes that took the lease from another holder.
func (s *memServer) takeoverLog() []takeover {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.takeovers)
}

// current returns the current state, whether the lease exists and who wrote it.
func (s *memServer) current() (leaderelection.LeaseRecord, bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.inner.Get(context.Background())
	r.ResourceVersion = s.presentLocked(r.ResourceVersion)
	return r, err == nil, s.writer
}

// breakWatches ends every open watch, as a 410 Gone (compaction) or a restart does.
func (s *memServer) breakWatches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.breakWatchesLocked()
}

func (s *memServer) breakWatchesLocked() int {
	n := len(s.watches)
	for w := range s.watches {
		w.cancel()
		delete(s.watches, w)
	}
	return n
}

// deleteLease deletes the lease by hand; it reports whether there was one.
func (s *memServer) deleteLease() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.exists {
		return false
	}
	leaderelectiontest.Delete(s.inner)
	s.writer, s.exists, s.installed = writerDelete, false, time.Now()
	return true
}

// restart breaks every watch and refuses every call for d.
func (s *memServer) restart(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.downUntil = time.Now().Add(d)
	s.breakWatchesLocked()
}

// restore puts back the state of back writes ago (1 = the one before the current),
// with its resourceVersion, breaks every watch and reports the versions, or ok false
// when there is no such snapshot. Writes after it reuse the versions that follow.
func (s *memServer) restore(back int) (from, to string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := len(s.snapshots) - 1 - back
	if i < 0 || back < 1 {
		return "", "", false
	}
	snap := s.snapshots[i]
	cur, _ := s.inner.Get(context.Background())
	from = s.presentLocked(cur.ResourceVersion)
	p, err := strconv.ParseUint(snap.record.ResourceVersion, 10, 64)
	if err != nil {
		return "", "", false
	}
	u, err := strconv.ParseUint(leaderelectiontest.Set(s.inner, snap.record).ResourceVersion, 10, 64)
	if err != nil || u < p {
		panic(fmt.Sprintf("chaos: restore: underlying version %d below presented %d", u, p))
	}
	s.epochs = append(s.epochs, epoch{from: u, offset: u - p})
	s.snapshots = s.snapshots[:i+1]
	s.writer, s.exists, s.installed = writerRestore, true, time.Now()
	s.snapshots[i].writer = writerRestore
	s.breakWatchesLocked()
	return from, snap.record.ResourceVersion, true
}

// serverView is the LeaseStore of one candidate incarnation on a memServer.
type serverView struct {
	s      *memServer
	writer string
}

func (v *serverView) Get(ctx context.Context) (leaderelection.LeaseRecord, error) {
	return v.s.get(ctx)
}

func (v *serverView) Create(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	return v.s.write(ctx, r, v.writer, true)
}

func (v *serverView) Update(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	return v.s.write(ctx, r, v.writer, false)
}

func (v *serverView) Watch(ctx context.Context) (<-chan leaderelection.LeaseEvent, error) {
	return v.s.watch(ctx)
}

func (v *serverView) String() string { return v.s.inner.String() }
