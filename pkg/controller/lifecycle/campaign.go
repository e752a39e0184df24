package lifecycle

import (
	"context"
	"time"
)

// Syncer is implemented by all-replica components that hold state a leader
// needs, such as the configuration or the discovered pods. Synced reports
// whether the component has read its state once; it must be safe to call
// from any goroutine and must not block. While any Syncer has not synced,
// the Manager keeps the campaigners (AddCampaigner) from starting, unless
// Options.CampaignUnsynced is set.
type Syncer interface {
	Synced() bool
}

// syncPoll is how often the Manager asks the Syncers whether they synced
// while a campaigner waits for them.
const syncPoll = 10 * time.Millisecond

// AddCampaigner registers the all-replica component that campaigns for
// leadership, typically the election adapter (leaderelection.Component).
// The Manager starts it once every all-replica component that implements
// Syncer reports Synced, so that a replica that cannot yet act as a leader
// (no configuration read, no pods discovered) never takes the lease; with
// Options.CampaignUnsynced it starts it at once, like any all-replica
// component. It must be called before Run.
func (m *Manager) AddCampaigner(c Component) error { return m.add(c, false, true) }

// campaignGate holds the campaigners back until the Syncers synced. It
// lives on Run's goroutine; a nil gate is open.
type campaignGate struct {
	waiting []*unit
	syncers []*unit
	since   time.Time
	ticker  *time.Ticker
}

// startAllReplica starts the all-replica components, the campaigners too
// when nothing holds them back, and returns the gate (nil when open). It
// runs on Run's goroutine.
func (m *Manager) startAllReplica(procCtx context.Context) *campaignGate {
	gate := &campaignGate{since: time.Now()}
	m.mu.Lock()
	starts := make([]launch, 0, len(m.allReplica))
	for _, u := range m.allReplica {
		if _, ok := u.c.(Syncer); ok {
			gate.syncers = append(gate.syncers, u)
		}
		if u.campaigner && !m.opts.CampaignUnsynced {
			gate.waiting = append(gate.waiting, u)
			continue
		}
		starts = append(starts, m.prepareLocked(u, procCtx, nil, nil))
	}
	m.mu.Unlock()
	m.logger.Info("controller runtime started", "allReplica", len(m.allReplica), "leaderOnly", len(m.leaderOnly), "termHooks", len(m.hooks))
	m.launchAll(starts)
	if len(gate.waiting) == 0 {
		return nil
	}
	if gate.open(m, procCtx) {
		return nil
	}
	m.mu.Lock()
	m.campaignWaiting = true
	m.mu.Unlock()
	m.logger.Info("waiting for the all-replica state a leader needs before campaigning",
		"campaigners", names(gate.waiting), "waitingFor", gate.unsynced())
	gate.ticker = time.NewTicker(syncPoll)
	return gate
}

// tick is the channel of the next poll; nil (never ready) for an open gate.
func (g *campaignGate) tick() <-chan time.Time {
	if g == nil || g.ticker == nil {
		return nil
	}
	return g.ticker.C
}

// check polls the Syncers once and opens the gate if they all synced.
func (g *campaignGate) check(m *Manager, procCtx context.Context) {
	if g.open(m, procCtx) {
		g.ticker.Stop()
		g.ticker = nil
		m.mu.Lock()
		m.campaignWaiting = false
		m.mu.Unlock()
	}
}

// open starts the campaigners if every Syncer synced, and reports whether
// it did.
func (g *campaignGate) open(m *Manager, procCtx context.Context) bool {
	if len(g.unsynced()) > 0 {
		return false
	}
	m.mu.Lock()
	if m.runState != runRunning {
		m.mu.Unlock()
		return false
	}
	starts := make([]launch, 0, len(g.waiting))
	for _, u := range g.waiting {
		starts = append(starts, m.prepareLocked(u, procCtx, nil, nil))
	}
	m.mu.Unlock()
	if len(g.syncers) > 0 {
		m.logger.Info("all-replica state synced; campaigning", "campaigners", names(g.waiting),
			"waited", time.Since(g.since).Round(time.Millisecond))
	}
	m.launchAll(starts)
	return true
}

// unsynced names the Syncers that have not synced.
func (g *campaignGate) unsynced() []string {
	var out []string
	for _, u := range g.syncers {
		if !u.c.(Syncer).Synced() {
			out = append(out, u.name)
		}
	}
	return out
}

func names(us []*unit) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.name
	}
	return out
}

// stop releases the gate's ticker.
func (g *campaignGate) stop() {
	if g != nil && g.ticker != nil {
		g.ticker.Stop()
	}
}
