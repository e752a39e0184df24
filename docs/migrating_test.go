package docs

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
)

// The Lease of MIGRATING.md's program: the scaffold's LeaderElectionID.
const migratedLease = "3f9d2ab1.my.domain"

// TestMigratingGuide applies MIGRATING.md's diff, and nothing else, to its
// scaffold-shaped program, builds the result in a module that requires this checkout
// through a replace, and runs three replicas of it on a real API server with the
// scaffold's --leader-elect: one leads and reconciles; stopped with SIGTERM, it hands
// the Lease over and another reconciles.
func TestMigratingGuide(t *testing.T) {
	text, err := os.ReadFile("MIGRATING.md")
	if err != nil {
		t.Fatal(err)
	}
	before := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(string(text))
	diff := regexp.MustCompile("(?s)```diff\n(.*?)```").FindStringSubmatch(string(text))
	if before == nil || diff == nil {
		t.Fatal("MIGRATING.md: want the program before (```go) and the changes (```diff)")
	}
	after, err := applyDiff(before[1], diff[1])
	if err != nil {
		t.Fatalf("MIGRATING.md's diff does not apply to its program: %v", err)
	}
	bin := build(t, after)
	env := batontest.StartEnv(t)
	runMigrated(t, env.Clientset(), bin, env.Kubeconfig(t))
}

func runMigrated(t *testing.T, cs kubernetes.Interface, bin, kubeconfig string) {
	ctx := t.Context()
	var ps []*process
	for range 3 {
		ps = append(ps, start(t, bin, "--kubeconfig", kubeconfig, "--leader-elect",
			"--leader-elect-resource-namespace=default",
			"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"))
	}
	seen := func(name string) bool {
		cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && cm.Data["seen"] == "true"
	}
	create := func(name string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "guestbook"}}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("first")
	batontest.WaitFor(t, 90*time.Second, "the first ConfigMap reconciled", func() bool { return seen("first") })
	first := leaseHolder(t, cs, migratedLease)
	// Each replica logs its own identity under the key "identity"; the others name
	// the holder too, under other keys, so a bare match could pick a follower.
	own := regexp.MustCompile(`"identity":\s*"` + regexp.QuoteMeta(first) + `"`)
	leader := -1
	for i, p := range ps {
		if own.MatchString(p.output()) {
			leader = i
		}
	}
	if first == "" || leader < 0 {
		t.Fatalf("the Lease is held by %q, which no replica's log names", first)
	}
	if err := ps[leader].stop(); err != nil {
		t.Fatalf("the leader after SIGTERM: %v\n%s", err, ps[leader].output())
	}
	create("second")
	batontest.WaitFor(t, 30*time.Second, "the second ConfigMap reconciled by the next leader", func() bool { return seen("second") })
	next := leaseHolder(t, cs, migratedLease)
	if next == first || next == "" {
		t.Fatalf("after the leader's SIGTERM the Lease is held by %q", next)
	}
	t.Logf("replica %s led, then %s", first, next)
}

// applyDiff applies a unified diff's hunks to src: each hunk's old lines (context and
// "-") must occur once in src, and are replaced by its new lines (context and "+").
func applyDiff(src, diff string) (string, error) {
	hunks := strings.Split(diff, "\n@@")
	for i, h := range hunks {
		_, body, ok := strings.Cut(h, "\n")
		if !ok || (i == 0 && !strings.HasPrefix(h, "@@")) {
			return "", fmt.Errorf("hunk %d: no @@ header", i)
		}
		var old, new strings.Builder
		for line := range strings.Lines(body) {
			switch {
			case strings.HasPrefix(line, " "):
				old.WriteString(line[1:])
				new.WriteString(line[1:])
			case strings.HasPrefix(line, "-"):
				old.WriteString(line[1:])
			case strings.HasPrefix(line, "+"):
				new.WriteString(line[1:])
			case line == "\n":
				old.WriteString(line)
				new.WriteString(line)
			default:
				return "", fmt.Errorf("hunk %d: line %q", i, line)
			}
		}
		if n := strings.Count(src, old.String()); n != 1 {
			return "", fmt.Errorf("hunk %d occurs %d times in the program:\n%s", i, n, old.String())
		}
		src = strings.Replace(src, old.String(), new.String(), 1)
	}
	return src, nil
}
