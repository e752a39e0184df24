package leaderelection

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
)

// logBuffer is a bytes.Buffer safe for concurrent writes, for cluster.logTo.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Log messages of deathProven.
const (
	takenOnProof  = "lease holder proven dead: its lease is not waited out"
	waitedOnProof = "lease holder proven dead, but its state was first seen on a list"
)

// TestDeathSignalFirstLookWaitsTheLease is the node suite's slow takeover
// (test/node, TestSIGKILLLeader with BATON_NODE_SETTLE=0s): a follower that starts
// and lists the lease just before its holder is SIGKILLed has seen the holder's
// state only on its first look, never in a watch event, and the holder writes no
// more. The proof of the holder's death does not shorten that state's wait (it may
// be a restored copy, see TestDeathSignalFirstLookAfterRestore): the follower takes
// the lease a LeaseDuration after its look, and says so in its log. Before the log
// was fixed it said the lease was not waited out.
func TestDeathSignalFirstLookWaitsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(11, 12))
		k := newKubelet(t)
		cl := newCluster(t)
		defer cl.stop()
		var logs logBuffer
		cl.logTo = &logs
		a := cl.startIncarnation(k, "a", incarnationOf("a", r), incarnation.Incarnation{}, false)
		time.Sleep(5 * time.Second)
		if cl.leader() != a.cand {
			t.Fatal("a does not lead")
		}
		b := cl.startIncarnation(k, "b", incarnationOf("b", r), incarnation.Incarnation{}, false)
		<-b.cand.e.Synced() // b's first look: a's state, listed
		looked := time.Now()
		a.kill(k) // before a renews again: b sees no write of a's in a watch event
		k.report(a.inc, true)
		nl := cl.waitLeader(a.cand, 2*DefaultLeaseDuration)
		_, started, _, _ := nl.snapshot()
		if nl != b.cand || started[0].Sub(looked) < DefaultLeaseDuration || started[0].Sub(looked) > DefaultLeaseDuration+DefaultRetryPeriod {
			t.Fatalf("%s led %v after its first look, want b, a lease duration (%v) after it", nl.id, started[0].Sub(looked), DefaultLeaseDuration)
		}
		if got := b.cand.e.Stats().DeathTakeovers; got != 0 {
			t.Errorf("b's Stats.DeathTakeovers = %d, want 0", got)
		}
		out := logs.String()
		if !strings.Contains(out, waitedOnProof) || strings.Contains(out, takenOnProof) {
			t.Errorf("b's log does not say that the proven death's lease is waited out:\n%s", out)
		}
	})
}

// TestDeathSignalFirstLookAfterRestore is why a first look is not taken on a proof
// (the rule TestDeathSignalFirstLookWaitsTheLease pays for): a leads, dies and is
// reported; b takes over on the proof, then is cut off and leads until its renew
// deadline. etcd is restored to a's last state. A follower c that starts now finds
// a's state on its first look and, after it, a true proof of a's death: taking the
// lease on it would make c lead beside b. c waits a LeaseDuration from its look.
func TestDeathSignalFirstLookAfterRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(13, 14))
		k := newKubelet(t)
		cl := newCluster(t)
		defer cl.stop()
		var logs logBuffer
		cl.logTo = &logs
		a := cl.startIncarnation(k, "a", incarnationOf("a", r), incarnation.Incarnation{}, false)
		time.Sleep(time.Second)
		b := cl.startIncarnation(k, "b", incarnationOf("b", r), incarnation.Incarnation{}, false)
		time.Sleep(5 * time.Second)
		if cl.leader() != a.cand {
			t.Fatal("a does not lead")
		}
		last, err := cl.mem.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		a.kill(k)
		k.report(a.inc, true)
		if nl := cl.waitLeader(a.cand, time.Second); nl != b.cand {
			t.Fatalf("%v leads after a's reported crash, want b", nl)
		}
		b.cand.store.setMode(modeHang) // b is cut off: it leads until its renew deadline
		cl.mem.set(last)               // the restore: a's last state, at a new version
		gate := make(chan struct{})
		cInc := incarnationOf("c", r)
		k.started(cInc, incarnation.Incarnation{}, false)
		c := cl.start("c", func(cfg *Config) { cfg.Incarnation, cfg.DeathWatch = cInc.String(), gatedDeath{inner: k, gate: gate} })
		<-c.e.Synced() // c's first look: a's restored state
		looked := time.Now()
		close(gate) // then c's proof of a's death
		time.Sleep(DefaultRenewDeadline)
		if terms, _, _, _ := c.snapshot(); len(terms) != 0 {
			t.Fatalf("c led %v within %v of its first look at a's restored state: a proof of a's death let it take a state it never saw written",
				terms, time.Since(looked))
		}
		if !strings.Contains(logs.String(), waitedOnProof) {
			t.Errorf("c's log does not say that the proven death's lease is waited out:\n%s", logs.String())
		}
		nl := cl.waitLeader(b.cand, 2*DefaultLeaseDuration)
		if _, started, _, _ := nl.snapshot(); nl != c || started[0].Sub(looked) < DefaultLeaseDuration {
			t.Fatalf("%s leads from %v after c's first look, want c, a lease duration (%v) after it", nl.id, started[0].Sub(looked), DefaultLeaseDuration)
		}
	})
}
