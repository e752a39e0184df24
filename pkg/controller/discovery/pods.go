// The rules a pod of either source must satisfy.

package discovery

import (
	"cmp"
	"fmt"
	"net"
	"slices"

	"github.com/baton-dev/baton/pkg/controller/config"
)

func sortPods(pods []config.Pod) {
	slices.SortFunc(pods, func(a, b config.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// CheckPods checks a pod set as NewSimulated and SetPods do: each pod needs
// a namespace and a name, unique together, and an IP that parses if it has
// one. The error wraps ErrInvalidPod and names the entry (pods[i]).
func CheckPods(pods []config.Pod) error {
	first := make(map[string]int, len(pods))
	for i, p := range pods {
		field := fmt.Sprintf("pods[%d]", i)
		if err := checkPod(field, p); err != nil {
			return err
		}
		if j, dup := first[key(p)]; dup {
			return fmt.Errorf("%w: %s: duplicate pod %s (also pods[%d])", ErrInvalidPod, field, key(p), j)
		}
		first[key(p)] = i
	}
	return nil
}

func podSet(pods []config.Pod) (map[string]config.Pod, error) {
	if err := CheckPods(pods); err != nil {
		return nil, err
	}
	set := make(map[string]config.Pod, len(pods))
	for _, p := range pods {
		set[key(p)] = p
	}
	return set, nil
}

func checkPod(field string, p config.Pod) error {
	switch {
	case p.Namespace == "":
		return fmt.Errorf("%w: %s.namespace: must not be empty", ErrInvalidPod, field)
	case p.Name == "":
		return fmt.Errorf("%w: %s.name: must not be empty", ErrInvalidPod, field)
	case p.IP != "" && net.ParseIP(p.IP) == nil:
		return fmt.Errorf("%w: %s.ip: %q is not an IP address", ErrInvalidPod, field, p.IP)
	}
	return nil
}
