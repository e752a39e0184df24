package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/baton-dev/baton/pkg/controller/config"
)

// DefaultMaxConn is the global maxconn DefaultTemplate renders when the
// configuration leaves MaxConn at 0.
const DefaultMaxConn = 4096

// DefaultBalance is the balance algorithm DefaultTemplate renders for a
// backend that names none.
const DefaultBalance = "roundrobin"

// DefaultTemplate is the built-in HAProxy configuration template. Its data
// is a TemplateData. The output depends only on the configuration's content
// and the ready pods, not on their versions, so equal inputs render equal
// text whatever their versions.
const DefaultTemplate = `# Rendered by baton. Do not edit: the leader rewrites it.
global
    maxconn {{or .Config.MaxConn 4096}}
    log stdout format raw local0

defaults
    mode http
    log global
    timeout connect 5s
    timeout client 30s
    timeout server 30s
{{range .Config.Frontends}}
frontend {{.Name}}
    bind {{.Bind}}
{{- with .DefaultBackend}}
    default_backend {{.}}
{{- end}}
{{end}}
{{- range $b := .Config.Backends}}
backend {{$b.Name}}
    balance {{or $b.Balance "roundrobin"}}
{{- range $.Pods}}
    server {{serverName .}} {{hostPort .IP $b.Port}} check
{{- end}}
{{end -}}
`

// TemplateData is what a template renders from.
type TemplateData struct {
	// Config is the input configuration (shared: read only).
	Config *config.Config
	// Pods are the ready pods, sorted by namespace then name, so the
	// output does not depend on discovery order.
	Pods []config.Pod
	// AllPods are all discovered pods, ready or not, in discovery order.
	AllPods       []config.Pod
	ConfigVersion string
	PodGeneration uint64
}

// TemplateFuncs are the functions every TemplateRenderer's template can
// call, besides text/template's built-ins:
//
//	hostPort IP PORT   "10.0.0.1:8080", "[fd00::1]:8080" (net.JoinHostPort)
//	serverName POD     "namespace.name" (or "name" without a namespace)
func TemplateFuncs() template.FuncMap {
	return template.FuncMap{
		"hostPort": func(host string, port int) string {
			return net.JoinHostPort(host, strconv.Itoa(port))
		},
		"serverName": func(p config.Pod) string {
			if p.Namespace == "" {
				return p.Name
			}
			return p.Namespace + "." + p.Name
		},
	}
}

// TemplateRenderer is the reference Renderer: a text/template executed over
// TemplateData. It is safe for concurrent use.
type TemplateRenderer struct {
	tmpl *template.Template
}

var defaultRenderer = &TemplateRenderer{
	tmpl: template.Must(template.New("haproxy.cfg").Option("missingkey=error").Funcs(TemplateFuncs()).Parse(DefaultTemplate)),
}

// DefaultRenderer returns the renderer of DefaultTemplate.
func DefaultRenderer() *TemplateRenderer { return defaultRenderer }

// NewTemplateRenderer parses text as a template named name, with
// TemplateFuncs available, and returns a renderer of it.
func NewTemplateRenderer(name, text string) (*TemplateRenderer, error) {
	if name == "" {
		return nil, errors.New("pipeline: template name is empty")
	}
	t, err := template.New(name).Option("missingkey=error").Funcs(TemplateFuncs()).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("pipeline: template %q: %w", name, err)
	}
	return &TemplateRenderer{tmpl: t}, nil
}

// Render executes the template. It returns an error for a nil config or a
// template execution error, and the context's error if it is done.
func (r *TemplateRenderer) Render(ctx context.Context, in Input) (string, error) {
	if in.Config == nil {
		return "", ErrNilConfig
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	data := TemplateData{
		Config:        in.Config,
		Pods:          readySorted(in.Pods),
		AllPods:       in.Pods,
		ConfigVersion: in.ConfigVersion,
		PodGeneration: in.PodGeneration,
	}
	var sb strings.Builder
	// About 50 bytes per server line, per backend, plus the fixed sections.
	sb.Grow(512 + 64*len(in.Config.Frontends) + len(in.Config.Backends)*(48+50*len(data.Pods)))
	if err := r.tmpl.Execute(&sb, data); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// readySorted returns a new slice of the ready pods, sorted.
func readySorted(pods []config.Pod) []config.Pod {
	out := make([]config.Pod, 0, len(pods))
	for _, p := range pods {
		if p.Ready {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b config.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
