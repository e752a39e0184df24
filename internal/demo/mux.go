package demo

import (
	"fmt"
	"html"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Mux serves the handlers of the demo's replicas under their names:
// /<replica>/metrics, /<replica>/healthz, /<replica>/readyz, and an index at
// /. A restarted replica's handler replaces its previous incarnation's. The
// zero value is ready to use and safe for concurrent use.
type Mux struct {
	// mu guards handlers.
	mu       sync.Mutex
	handlers map[string]http.Handler
}

// Set serves h under /name/.
func (m *Mux) Set(name string, h http.Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handlers == nil {
		m.handlers = map[string]http.Handler{}
	}
	m.handlers[name] = h
}

func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	name, rest, _ := strings.Cut(path, "/")
	m.mu.Lock()
	h := m.handlers[name]
	names := make([]string, 0, len(m.handlers))
	for n := range m.handlers {
		names = append(names, n)
	}
	m.mu.Unlock()
	if name == "" {
		slices.Sort(names)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintln(w, "<!doctype html><title>baton demo</title><h1>baton demo replicas</h1><ul>")
		for _, n := range names {
			e := html.EscapeString(n)
			fmt.Fprintf(w, `<li>%s: <a href="/%s/metrics">metrics</a> <a href="/%s/healthz">healthz</a> <a href="/%s/readyz">readyz</a></li>`+"\n", e, e, e, e)
		}
		fmt.Fprintln(w, "</ul>")
		return
	}
	if h == nil {
		http.NotFound(w, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + rest
	r2.URL.RawPath = ""
	h.ServeHTTP(w, r2)
}
