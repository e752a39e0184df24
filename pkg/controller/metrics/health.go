package metrics

import (
	"errors"
	"net/http"
)

// HealthChecker is what Healthy reads from a source that can tell its own
// health; *k8sle.Elector satisfies it.
type HealthChecker interface {
	Healthy() error
}

// Healthy returns nil while the core's parts of a replica can do their
// job, else the reasons, joined: the runtime's (lifecycle.Status.Healthy:
// failed components, overstays, a term missing a leader-only component)
// and, when the Election source also has a Healthy method, the elector's (a
// missed renew deadline). A nil source is skipped. It backs /healthz; an
// application adds its own checks beside it.
func (s Sources) Healthy() error {
	var errs []error
	if s.Election != nil {
		if h, ok := s.Election.(HealthChecker); ok {
			errs = append(errs, h.Healthy())
		}
	}
	if s.Runtime != nil {
		errs = append(errs, s.Runtime.Status().Healthy())
	}
	return errors.Join(errs...)
}

// CheckHandler serves a health check: 200 and "ok" while check returns
// nil, else 503 and the reasons, one per line. Responses are never cached.
func CheckHandler(check func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		err := check()
		if err == nil {
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(err.Error() + "\n"))
	})
}
