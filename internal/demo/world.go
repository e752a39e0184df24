package demo

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/baton-dev/baton/pkg/controller/app"
	"github.com/baton-dev/baton/pkg/controller/config"
)

// podNamespace is the namespace of the demo's pods.
const podNamespace = "web"

// world is the embedded world and what the run has made of it: the newest
// valid configuration, whether the newest document is an invalid one, and
// the pods.
type world struct {
	e   *app.Embedded
	rng *rand.Rand // only the engine's goroutine draws from it

	// mu guards the fields below.
	mu             sync.Mutex
	maxConn        int
	validVersion   string
	invalid        bool
	invalidVersion string
	pods           []config.Pod
	serial         int // pods created so far
}

// configYAML is the demo's configuration document.
func configYAML(maxConn, port int) []byte {
	return fmt.Appendf(nil, `frontends:
  - name: http
    bind: ":8080"
    defaultBackend: web
backends:
  - name: web
    port: %d
    balance: roundrobin
maxConn: %d
`, port, maxConn)
}

func newWorld(rng *rand.Rand) (*world, error) {
	w := &world{rng: rng, maxConn: 2000}
	for range 3 {
		w.pods = append(w.pods, w.newPod())
	}
	raw := configYAML(w.maxConn, 8080)
	_, v, err := config.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("demo: built-in configuration: %w", err)
	}
	w.validVersion = v
	w.e, err = app.NewEmbedded(app.EmbeddedOptions{Config: raw, Pods: w.pods})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (w *world) newPod() config.Pod {
	w.serial++
	return config.Pod{
		Namespace: podNamespace,
		Name:      fmt.Sprintf("haproxy-%d", w.serial),
		IP:        fmt.Sprintf("10.0.%d.%d", w.serial/250, w.serial%250+1),
		Ready:     true,
	}
}

// changeConfig writes a new document: a valid one with another maxConn, or
// an invalid one (a backend port out of range) that must not replace it.
// It returns a description.
func (w *world) changeConfig(valid bool) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !valid {
		raw := configYAML(w.maxConn, 70000)
		w.invalid, w.invalidVersion = true, config.RawVersion(raw)
		w.e.Config.Set(raw)
		return "config: an invalid document (backends[0].port 70000); the last valid one must stay in force", nil
	}
	old := w.maxConn
	for w.maxConn == old {
		w.maxConn = 1000 + 50*w.rng.IntN(180)
	}
	raw := configYAML(w.maxConn, 8080)
	_, v, err := config.Load(raw)
	if err != nil {
		return "", err
	}
	w.validVersion, w.invalid = v, false
	w.e.Config.Set(raw)
	return fmt.Sprintf("config: maxConn %d -> %d (version %s)", old, w.maxConn, short(v)), nil
}

// changePods makes one change to the pods: one added, one removed, one's
// readiness flipped or one moved to a new IP, keeping at least two pods of
// which at least one is ready (an empty backend would not validate).
func (w *world) changePods() (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pods := slices.Clone(w.pods)
	ready := 0
	for _, p := range pods {
		if p.Ready {
			ready++
		}
	}
	var what string
	for what == "" {
		i := w.rng.IntN(len(pods))
		switch w.rng.IntN(4) {
		case 0:
			p := w.newPod()
			pods = append(pods, p)
			what = fmt.Sprintf("+%s (%s)", p.Name, p.IP)
		case 1:
			if len(pods) <= 2 || (pods[i].Ready && ready <= 1) {
				continue
			}
			what = "-" + pods[i].Name
			pods = slices.Delete(pods, i, i+1)
		case 2:
			if pods[i].Ready && ready <= 1 {
				continue
			}
			pods[i].Ready = !pods[i].Ready
			what = fmt.Sprintf("%s ready=%v", pods[i].Name, pods[i].Ready)
		case 3:
			w.serial++
			pods[i].IP = fmt.Sprintf("10.0.%d.%d", w.serial/250, w.serial%250+1)
			what = fmt.Sprintf("%s moved to %s", pods[i].Name, pods[i].IP)
		}
	}
	if err := w.e.Pods.Set(pods); err != nil {
		return "", err
	}
	w.pods = w.e.Pods.Get()
	return "pods: " + what, nil
}

// newest is the state a new leader must hold.
type newest struct {
	ConfigVersion  string // the newest valid configuration
	Invalid        bool   // the newest document was refused
	InvalidVersion string
	Pods           []config.Pod
}

func (w *world) newest() newest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return newest{ConfigVersion: w.validVersion, Invalid: w.invalid, InvalidVersion: w.invalidVersion, Pods: slices.Clone(w.pods)}
}

func (w *world) describe() string {
	n := w.newest()
	ready := 0
	var names []string
	for _, p := range n.Pods {
		mark := ""
		if p.Ready {
			ready++
		} else {
			mark = " (not ready)"
		}
		names = append(names, p.Name+mark)
	}
	w.mu.Lock()
	maxConn := w.maxConn
	w.mu.Unlock()
	cfg := fmt.Sprintf("config %s (maxConn %d)", short(n.ConfigVersion), maxConn)
	if n.Invalid {
		cfg += ", newest document invalid"
	}
	return fmt.Sprintf("world      %s · %s, %d ready: %s", cfg, count(len(n.Pods), "pod"), ready, strings.Join(names, ", "))
}

// readyIPs returns the IPs of the ready pods and of the others.
func (n newest) readyIPs() (ready, notReady []string) {
	for _, p := range n.Pods {
		if p.Ready {
			ready = append(ready, p.IP)
		} else {
			notReady = append(notReady, p.IP)
		}
	}
	return ready, notReady
}
