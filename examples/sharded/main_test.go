package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

const (
	shards  = 12 // even shares for three replicas and for two
	objects = 60
)

// replica is one in-process replica: its manager's handle of the sharded controller,
// and its log.
type replica struct {
	*batontest.Replica
	h   *batoncr.Sharded
	log *logBuffer
}

func startReplica(t *testing.T, kit *batontest.Replica) *replica {
	t.Helper()
	r := &replica{Replica: kit, log: &logBuffer{}}
	lease, renew, retry := 3*time.Second, 2*time.Second, 400*time.Millisecond
	mgr, h, err := Setup(Config{Rest: kit.Config(), Identity: kit.Name, LeaseNamespace: "default", HealthAddr: "0",
		Logger: r.log.logger(),
		Ring:   sharding.Config{Shards: shards, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry},
		// A registry per Runtime: three share this process.
		Runtime: batoncr.Options{MetricsRegisterer: prometheus.NewRegistry()}})
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	kit.Run(t, mgr.Start)
	return r
}

// owners returns the owner of each shard led by one of rs; ok is false when two seem
// to lead one shard (their Owned were read one after the other, during a move).
func owners(rs []*replica) (owner map[int]string, ok bool) {
	owner = map[int]string{}
	for _, r := range rs {
		for _, st := range r.h.Sharder().Owned() {
			if _, dup := owner[st.Shard]; dup {
				return owner, false
			}
			owner[st.Shard] = r.Name
		}
	}
	return owner, true
}

// settled reports whether rs lead every shard between them, each its fair share, and
// every labelled ConfigMap of the shards in only (nil: all) records that the owner of
// its shard reconciled it.
func settled(t *testing.T, cs kubernetes.Interface, ring sharding.Ring, rs []*replica, only []int) bool {
	for _, r := range rs {
		if n := len(r.h.Sharder().Owned()); n != shards/len(rs) {
			return false
		}
	}
	owner, ok := owners(rs)
	return ok && len(owner) == shards && reconciledByOwners(t, cs, ring, owner, only) && logsItsShards(rs) &&
		accountsOwned(t, cs) && cachesItsShards(t, cs, ring, rs)
}

// accountsOwned reports whether every labelled ConfigMap has its ServiceAccount, of
// its name, whose controller owner it is.
func accountsOwned(t *testing.T, cs kubernetes.Interface) bool {
	t.Helper()
	ctx := context.Background()
	list, err := cs.CoreV1().ConfigMaps("work").List(ctx, metav1.ListOptions{LabelSelector: Label + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		sa, err := cs.CoreV1().ServiceAccounts("work").Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		if owner := metav1.GetControllerOf(sa); owner == nil || owner.UID != cm.UID {
			return false
		}
	}
	return true
}

// cachesItsShards reports whether each of rs caches exactly the labelled ConfigMaps
// of the shards it leads, and their ServiceAccounts.
func cachesItsShards(t *testing.T, cs kubernetes.Interface, ring sharding.Ring, rs []*replica) bool {
	t.Helper()
	list, err := cs.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{LabelSelector: Label + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	perShard := map[int]int{}
	for _, cm := range list.Items {
		perShard[ring.ShardOf(string(cm.UID))]++
	}
	for _, r := range rs {
		want := 0
		for _, shard := range shardsOf(r) {
			want += perShard[shard]
		}
		if r.h.CachedObjects() != want || r.h.Cached(&corev1.ServiceAccount{}) != want {
			return false
		}
	}
	return true
}

// logsItsShards reports whether the last "shards owned" line of each of rs names the
// shards it owns.
func logsItsShards(rs []*replica) bool {
	for _, r := range rs {
		var last string
		for line := range strings.Lines(r.log.String()) {
			if strings.Contains(line, `"msg"="shards owned"`) {
				last = line
			}
		}
		if !strings.Contains(last, `"shards"=`+fmt.Sprint(shardsOf(r))+` `) {
			return false
		}
	}
	return true
}

// TestThreeReplicasShareAndHandOver runs three replicas against a real API server over
// labelled ConfigMaps: the shards are shared evenly, each replica caches exactly the
// ConfigMaps of its shards and their ServiceAccounts, every labelled ConfigMap is
// reconciled by the owner of its shard and owns its ServiceAccount (and no other
// ConfigMap is touched, not even labelled), every replica logs the shards it owns and
// its reconciles; a ServiceAccount deleted is made again; then one replica stops
// gracefully, the other two take its shards, evenly, and reconcile its objects. No
// object's term stamp ever goes back.
func TestThreeReplicasShareAndHandOver(t *testing.T) {
	env := batontest.StartEnv(t)
	cs := env.Clientset()
	ctx := context.Background()
	monitor := batontest.WatchStamps(t, cs, batoncr.TermAnnotation)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range objects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: fmt.Sprint("cm-", i), Labels: map[string]string{Label: "true"}}}
		if _, err := cs.CoreV1().ConfigMaps("work").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	unlabelled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: "not-mine"}}
	if _, err := cs.CoreV1().ConfigMaps("work").Create(ctx, unlabelled, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ring, err := sharding.NewRing(shards)
	if err != nil {
		t.Fatal(err)
	}
	var rs []*replica
	for _, kit := range batontest.NewReplicas(t, 3, env.Config()) {
		rs = append(rs, startReplica(t, kit))
	}

	start := time.Now()
	batontest.WaitFor(t, 30*time.Second, "the shards shared evenly by three, every ConfigMap reconciled by its shard's owner", func() bool {
		return settled(t, cs, ring, rs, nil)
	})
	t.Logf("three replicas: balanced and %d ConfigMaps reconciled %v after the start (loaded machine: a rough figure)",
		objects, time.Since(start).Round(time.Millisecond))
	for _, r := range rs {
		t.Logf("%s: shards %v, stats %+v", r.Name, shardsOf(r), r.h.Stats())
		if !strings.Contains(r.log.String(), `"msg"="reconciled"`) {
			t.Errorf("%s's log has no reconciled line:\n%s", r.Name, r.log.String())
		}
	}

	// An owned object deleted: its owner is reconciled by its shard's owner alone,
	// which makes it again.
	child, err := cs.CoreV1().ServiceAccounts("work").Get(ctx, "cm-7", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ServiceAccounts("work").Delete(ctx, child.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	batontest.WaitFor(t, 30*time.Second, "the deleted ServiceAccount made again for its owner", func() bool {
		sa, err := cs.CoreV1().ServiceAccounts("work").Get(ctx, child.Name, metav1.GetOptions{})
		return err == nil && sa.UID != child.UID && settled(t, cs, ring, rs, nil)
	})

	// A graceful stop: r2 hands its shards over; r0 and r1 share them and reconcile
	// their objects.
	gone := rs[2]
	moved := shardsOf(gone)
	stopped := time.Now()
	gone.Stop(t)
	if n := len(gone.h.Sharder().Owned()); n != 0 {
		t.Errorf("%s still owns %d shards after it stopped", gone.Name, n)
	}
	batontest.WaitFor(t, 30*time.Second, "the shards shared evenly by two, the moved shards' ConfigMaps reconciled by their new owners", func() bool {
		return settled(t, cs, ring, rs[:2], moved)
	})
	t.Logf("%s stopped with shards %v: r0 and r1 balanced and its ConfigMaps reconciled %v after the stop began (loaded machine: a rough figure)",
		gone.Name, moved, time.Since(stopped).Round(time.Millisecond))
	if !strings.Contains(gone.log.String(), `"msg"="left"`) {
		t.Errorf("%s did not log that it left the ring:\n%s", gone.Name, gone.log.String())
	}
	cm, err := cs.CoreV1().ConfigMaps("work").Get(ctx, unlabelled.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != 0 || len(cm.Annotations) != 0 || len(cm.Labels) != 0 {
		t.Errorf("the unlabelled ConfigMap was written: data %v, annotations %v, labels %v", cm.Data, cm.Annotations, cm.Labels)
	}
	if err := monitor.Err(); err != nil {
		t.Fatal(err)
	}
	if monitor.Seen() < objects {
		t.Fatalf("the monitor saw %d stamped writes, want at least %d", monitor.Seen(), objects)
	}
}

// reconciledByOwners reports whether every labelled ConfigMap records that the owner
// of its shard reconciled it, in that shard, stamped with a term; only those of the
// shards in only, unless only is nil.
func reconciledByOwners(t *testing.T, cs kubernetes.Interface, ring sharding.Ring, owner map[int]string, only []int) bool {
	t.Helper()
	list, err := cs.CoreV1().ConfigMaps("work").List(context.Background(), metav1.ListOptions{LabelSelector: Label + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		shard := ring.ShardOf(string(cm.UID))
		if only != nil && !slices.Contains(only, shard) {
			continue
		}
		if cm.Data[ReconciledBy] != owner[shard] || cm.Data[ShardKey] != fmt.Sprint(shard) ||
			cm.Annotations[batoncr.TermAnnotation] == "" {
			return false
		}
	}
	return len(list.Items) == objects
}

func shardsOf(r *replica) []int {
	var out []int
	for _, st := range r.h.Sharder().Owned() {
		out = append(out, st.Shard)
	}
	slices.Sort(out)
	return out
}

// logBuffer collects one replica's log lines.
type logBuffer struct {
	// mu guards b.
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.b.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{})
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
