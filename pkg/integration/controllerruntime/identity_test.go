package controllerruntime

import (
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// TestDefaultIdentityMakesValidLeaseNames pins that the default identity gives a
// sharded ring a member Lease name the API server accepts (issue 25, defect 4: the
// manager's "<hostname>_<uuid>" is not a DNS-1123 subdomain, so every renew of the
// member Lease failed and no replica saw the others).
func TestDefaultIdentityMakesValidLeaseNames(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{host, "Worker_Node.3", "--", "kind-control-plane"} {
		id := defaultIdentity(h)
		cfg := sharding.Config{Identity: id, Name: "configmap-mirror", Namespace: "default", Shards: 8}
		if _, err := sharding.NewWithStores(cfg, sharding.NewMemoryStores(8), sharding.Callbacks{}, nil); err != nil {
			t.Errorf("hostname %q: identity %q: sharding refuses it: %v", h, id, err)
		}
	}
	o := Options{LeaderElectionID: "x", LeaderElectionNamespace: "default", MetricsRegisterer: prometheus.NewRegistry()}
	s, err := o.resolve(logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if id := s.election.Identity; strings.Contains(id, "_") || id == "" {
		t.Errorf("default identity %q: want no '_'", id)
	}
}
