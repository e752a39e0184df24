package config

// Config is the controller's configuration. A Config carried by an event is
// shared and must not be modified.
type Config struct {
	// Frontends are the listeners of the rendered proxy configuration,
	// from 1 to MaxFrontends.
	Frontends []Frontend `json:"frontends"`
	// Backends are the server pools the frontends route to, from 1 to
	// MaxBackends; their servers are the discovered pods.
	Backends []Backend `json:"backends"`
	// MaxConn is the global connection limit, from 0 to MaxMaxConn; 0
	// takes the renderer's default.
	MaxConn int `json:"maxConn,omitempty"`
}

// Frontend is one listener.
type Frontend struct {
	Name           string `json:"name"`
	Bind           string `json:"bind"` // host:port or :port, in its one spelling (see Validate)
	DefaultBackend string `json:"defaultBackend"`
}

// Backend is one server pool.
type Backend struct {
	Name    string `json:"name"`
	Port    int    `json:"port"`    // the port on each pod, from 1 to 65535
	Balance string `json:"balance"` // roundrobin, leastconn or source
}

// Pod is a discovered target pod.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	IP        string `json:"ip"`
	Ready     bool   `json:"ready"`
}
