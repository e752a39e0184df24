// The simulated source: a pod set held in memory and changed by calls.

package discovery

import (
	"fmt"

	"github.com/baton-dev/baton/pkg/controller/config"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// NewSimulated returns a Discovery of a simulated pod set that starts as
// initial. Each pod needs a name and a namespace, an IP (if set) that
// parses, and no two may share namespace and name.
func NewSimulated(bus *busevents.EventBus, initial []config.Pod, opts Options) (*Discovery, error) {
	set, err := podSet(initial)
	if err != nil {
		return nil, err
	}
	d, err := newDiscovery(bus, opts)
	if err != nil {
		return nil, err
	}
	d.sim, d.simVersion = set, 1 // the first set is version 1
	return d, nil
}

// simulated returns the simulated set and its version.
func (d *Discovery) simulated() ([]config.Pod, uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]config.Pod, 0, len(d.sim))
	for _, p := range d.sim {
		out = append(out, p)
	}
	return out, d.simVersion
}

// SetPodsAt replaces the simulated set with pods, checked as by
// NewSimulated, read from a shared source at version (a version every
// replica's Discovery gets with the same set, such as a shared pod set's
// own counter): the set is published with generation version, so that the
// replicas agree on it and it never goes back when another replica leads.
// A version not above the current one leaves the version as it is.
func (d *Discovery) SetPodsAt(pods []config.Pod, version uint64) error {
	set, err := podSet(pods)
	if err != nil {
		return err
	}
	return d.changeAt(version, func(m map[string]config.Pod) error {
		clear(m)
		for k, p := range set {
			m[k] = p
		}
		return nil
	})
}

// SetPod adds p to the simulated set, or replaces the pod of the same
// namespace and name. It returns ErrNotSimulated in cluster mode and an
// error wrapping ErrInvalidPod for a pod NewSimulated would refuse.
func (d *Discovery) SetPod(p config.Pod) error {
	if err := checkPod("pod", p); err != nil {
		return err
	}
	return d.change(func(set map[string]config.Pod) error {
		set[key(p)] = p
		return nil
	})
}

// SetPods replaces the simulated set with pods, checked as by NewSimulated.
func (d *Discovery) SetPods(pods []config.Pod) error { return d.SetPodsAt(pods, 0) }

// RemovePod removes a pod from the simulated set; ErrPodNotFound if it is
// not there.
func (d *Discovery) RemovePod(namespace, name string) error {
	return d.change(func(set map[string]config.Pod) error {
		k := namespace + "/" + name
		if _, ok := set[k]; !ok {
			return fmt.Errorf("%w: %s", ErrPodNotFound, k)
		}
		delete(set, k)
		return nil
	})
}

// change applies fn to the simulated set; a change made without a version
// counts one up from the current version.
func (d *Discovery) change(fn func(map[string]config.Pod) error) error {
	return d.changeAt(0, fn)
}

func (d *Discovery) changeAt(version uint64, fn func(map[string]config.Pod) error) error {
	if d.clientset != nil {
		return ErrNotSimulated
	}
	d.mu.Lock()
	err := fn(d.sim)
	if err == nil {
		if version == 0 {
			version = d.simVersion + 1
		}
		d.simVersion = max(d.simVersion, version)
	}
	d.mu.Unlock()
	if err == nil {
		d.notify()
	}
	return err
}

func key(p config.Pod) string { return p.Namespace + "/" + p.Name }
