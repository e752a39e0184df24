package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/pipeline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig() *config.Config {
	return &config.Config{
		Frontends: []config.Frontend{
			{Name: "web", Bind: ":80", DefaultBackend: "app"},
			{Name: "api", Bind: "0.0.0.0:8443", DefaultBackend: "api"},
		},
		Backends: []config.Backend{
			{Name: "app", Port: 8080},
			{Name: "api", Port: 9090, Balance: "source"},
		},
		MaxConn: 2000,
	}
}

func pods(n int) []config.Pod {
	out := make([]config.Pod, n)
	for i := range out {
		out[i] = config.Pod{Namespace: "ns", Name: fmt.Sprintf("pod-%04d", i), IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), Ready: true}
	}
	return out
}

// serverLines returns the server lines of one backend section of out.
func serverLines(t *testing.T, out, backend string) []string {
	t.Helper()
	var in bool
	var got []string
	found := false
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if f[0] == "backend" || f[0] == "frontend" || f[0] == "global" || f[0] == "defaults" {
			in = f[0] == "backend" && len(f) > 1 && f[1] == backend
			found = found || in
			continue
		}
		if in && f[0] == "server" {
			got = append(got, strings.Join(f, " "))
		}
	}
	if !found {
		t.Fatalf("no backend %q in output:\n%s", backend, out)
	}
	return got
}

func TestExecuteRendersReadyPods(t *testing.T) {
	notReady := config.Pod{Namespace: "ns", Name: "pod-zzzz", IP: "10.9.9.9", Ready: false}
	tests := []struct {
		name     string
		pods     []config.Pod
		wantApp  []string
		wantErrs []string // findings, for 0 pods: both backends empty
	}{
		{
			name:     "no pods",
			pods:     nil,
			wantErrs: []string{`line 21: backend "app" has no servers`, `line 24: backend "api" has no servers`},
		},
		{
			name:    "one pod and one not ready",
			pods:    []config.Pod{notReady, pods(1)[0]},
			wantApp: []string{"server ns.pod-0000 10.0.0.1:8080 check"},
		},
		{
			name: "three pods given out of order, IPv6 among them",
			pods: []config.Pod{
				{Namespace: "ns", Name: "c", IP: "fd00::3", Ready: true},
				{Namespace: "ns", Name: "a", IP: "10.0.0.1", Ready: true},
				notReady,
				{Namespace: "am", Name: "z", IP: "10.0.0.26", Ready: true},
			},
			wantApp: []string{
				"server am.z 10.0.0.26:8080 check",
				"server ns.a 10.0.0.1:8080 check",
				"server ns.c [fd00::3]:8080 check",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := pipeline.NewDefault().Execute(context.Background(), pipeline.Input{
				Config: testConfig(), ConfigVersion: "cv", Pods: tt.pods, PodGeneration: 9,
			})
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if res.ConfigVersion != "cv" || res.PodGeneration != 9 {
				t.Errorf("versions = %q/%d, want cv/9", res.ConfigVersion, res.PodGeneration)
			}
			if got := serverLines(t, res.Output, "app"); strings.Join(got, "\n") != strings.Join(tt.wantApp, "\n") {
				t.Errorf("app servers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.wantApp, "\n"))
			}
			if got := serverLines(t, res.Output, "api"); len(got) != len(tt.wantApp) {
				t.Errorf("api has %d servers, want %d", len(got), len(tt.wantApp))
			}
			for _, want := range []string{"maxconn 2000", "bind :80", "bind 0.0.0.0:8443", "default_backend api", "balance roundrobin", "balance source"} {
				if !strings.Contains(res.Output, "    "+want+"\n") {
					t.Errorf("output lacks %q:\n%s", want, res.Output)
				}
			}
			if strings.Contains(res.Output, notReady.IP) {
				t.Errorf("output has the not-ready pod:\n%s", res.Output)
			}
			if got := errStrings(res.Errors); strings.Join(got, "\n") != strings.Join(tt.wantErrs, "\n") {
				t.Errorf("findings:\n%s\nwant:\n%s\noutput:\n%s", strings.Join(got, "\n"), strings.Join(tt.wantErrs, "\n"), numbered(res.Output))
			}
			if res.Valid() != (len(tt.wantErrs) == 0) {
				t.Errorf("Valid() = %v", res.Valid())
			}
		})
	}
}

func TestExecuteDefaultsAndLargeSet(t *testing.T) {
	cfg := &config.Config{
		Frontends: []config.Frontend{{Name: "web", Bind: ":80", DefaultBackend: "app"}},
		Backends:  []config.Backend{{Name: "app", Port: 80}},
	}
	res, err := pipeline.NewDefault().Execute(context.Background(), pipeline.Input{Config: cfg, Pods: pods(1000)})
	if err != nil || !res.Valid() {
		t.Fatalf("Execute: %v %v", err, res.Err())
	}
	if !strings.Contains(res.Output, fmt.Sprintf("    maxconn %d\n", pipeline.DefaultMaxConn)) ||
		!strings.Contains(res.Output, "    balance "+pipeline.DefaultBalance+"\n") {
		t.Errorf("defaults not rendered:\n%s", res.Output[:300])
	}
	if got := len(serverLines(t, res.Output, "app")); got != 1000 {
		t.Errorf("%d server lines, want 1000", got)
	}
}

func TestExecuteErrors(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	boom := errors.New("boom")
	okRender := pipeline.RendererFunc(func(context.Context, pipeline.Input) (string, error) { return "x", nil })
	okValidate := pipeline.ValidatorFunc(func(context.Context, string) ([]error, error) { return nil, nil })
	tests := []struct {
		name       string
		ctx        context.Context
		in         pipeline.Input
		r          pipeline.Renderer
		v          pipeline.Validator
		want       []error
		wantOutput string
	}{
		{name: "nil config", ctx: context.Background(), in: pipeline.Input{ConfigVersion: "v"}, want: []error{pipeline.ErrNilConfig}},
		{name: "canceled", ctx: canceled, in: pipeline.Input{Config: testConfig()}, want: []error{pipeline.ErrCanceled, context.Canceled}},
		{
			name: "render fails", ctx: context.Background(), in: pipeline.Input{Config: testConfig()},
			r: pipeline.RendererFunc(func(context.Context, pipeline.Input) (string, error) { return "", boom }),
			v: okValidate, want: []error{pipeline.ErrRender, boom},
		},
		{
			name: "validator fails", ctx: context.Background(), in: pipeline.Input{Config: testConfig()},
			r: okRender, v: pipeline.ValidatorFunc(func(context.Context, string) ([]error, error) { return []error{boom}, boom }),
			want: []error{pipeline.ErrValidator, boom}, wantOutput: "x",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pipeline.NewDefault()
			if tt.r != nil {
				var err error
				if p, err = pipeline.New(tt.r, tt.v); err != nil {
					t.Fatal(err)
				}
			}
			res, err := p.Execute(tt.ctx, tt.in)
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("Execute error %v is not %v", err, w)
				}
			}
			if res.Output != tt.wantOutput || res.Errors != nil {
				t.Errorf("result output %q errors %v, want output %q and no findings", res.Output, res.Errors, tt.wantOutput)
			}
			if res.ConfigVersion != tt.in.ConfigVersion {
				t.Errorf("ConfigVersion %q not carried", res.ConfigVersion)
			}
		})
	}
}

// TestExecuteCanceledDuringRender: a context that ends while rendering
// stops the pipeline before validation, keeping the output for diagnosis.
func TestExecuteCanceledDuringRender(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	validated := false
	p, err := pipeline.New(
		pipeline.RendererFunc(func(context.Context, pipeline.Input) (string, error) { cancel(); return "rendered", nil }),
		pipeline.ValidatorFunc(func(context.Context, string) ([]error, error) { validated = true; return nil, nil }),
	)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Execute(ctx, pipeline.Input{Config: testConfig()})
	if !errors.Is(err, pipeline.ErrCanceled) || !errors.Is(err, context.Canceled) || validated {
		t.Errorf("Execute = %v (validated %v), want ErrCanceled before validation", err, validated)
	}
	if res.Output != "rendered" {
		t.Errorf("Output = %q, want the rendered text", res.Output)
	}
}

func TestNew(t *testing.T) {
	v := pipeline.HAProxyValidator{}
	if _, err := pipeline.New(nil, v); err == nil || err.Error() != "pipeline: renderer is nil" {
		t.Errorf("New(nil, v) = %v", err)
	}
	if _, err := pipeline.New(pipeline.DefaultRenderer(), nil); err == nil || err.Error() != "pipeline: validator is nil" {
		t.Errorf("New(r, nil) = %v", err)
	}
	if _, err := pipeline.NewTemplateRenderer("", "x"); err == nil || !strings.Contains(err.Error(), "template name is empty") {
		t.Errorf("NewTemplateRenderer empty name = %v", err)
	}
	if _, err := pipeline.NewTemplateRenderer("bad", "{{.Config"); err == nil || !strings.HasPrefix(err.Error(), `pipeline: template "bad": `) {
		t.Errorf("NewTemplateRenderer parse error = %v", err)
	}
}

func TestCustomTemplate(t *testing.T) {
	r, err := pipeline.NewTemplateRenderer("list", `{{range .Pods}}{{serverName .}}={{hostPort .IP 1}} {{end}}{{len .AllPods}} gen {{.PodGeneration}}`)
	if err != nil {
		t.Fatal(err)
	}
	in := pipeline.Input{Config: testConfig(), PodGeneration: 4, Pods: []config.Pod{
		{Name: "b", IP: "10.0.0.2", Ready: true}, {Name: "a", IP: "::1", Ready: true}, {Name: "c", Ready: false},
	}}
	out, err := r.Render(context.Background(), in)
	if want := "a=[::1]:1 b=10.0.0.2:1 3 gen 4"; err != nil || out != want {
		t.Errorf("Render = %q, %v; want %q", out, err, want)
	}
	r, _ = pipeline.NewTemplateRenderer("bad field", `{{.Nope}}`)
	if _, err := r.Render(context.Background(), in); err == nil {
		t.Error("Render of an unknown field succeeded")
	}
	// A renderer error surfaces from Execute as ErrRender.
	p, _ := pipeline.New(r, pipeline.HAProxyValidator{})
	if _, err := p.Execute(context.Background(), in); !errors.Is(err, pipeline.ErrRender) {
		t.Errorf("Execute = %v, want ErrRender", err)
	}
}

func TestResultErr(t *testing.T) {
	var r pipeline.Result
	if r.Err() != nil {
		t.Errorf("valid result Err = %v", r.Err())
	}
	r.Errors = []error{pipeline.LineError{Line: 3, Msg: "bad"}}
	err := r.Err()
	var le pipeline.LineError
	if !errors.Is(err, pipeline.ErrInvalidOutput) || !errors.As(err, &le) || le.Line != 3 {
		t.Errorf("Err = %v, want ErrInvalidOutput wrapping the LineError", err)
	}
}

func errStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func numbered(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%3d %s\n", i+1, l)
	}
	return b.String()
}
