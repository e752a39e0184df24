package layout_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/baton-dev/baton"

// core lists the packages of the core layer, relative to the module; a
// path ending in /... includes its subpackages. Anything of the module
// outside this list is the reference controller, the demo or the command.
var core = []string{
	"pkg/events/...",
	"pkg/controller/leadership",
	"pkg/k8s/leaderelection/...",
	"pkg/k8s/sharding/...",
	"pkg/k8s/incarnation",
	"pkg/k8s/internal/kwatch",
	"pkg/controller/leaderelection",
	"pkg/controller/lifecycle",
	"pkg/controller/metrics",
	"pkg/termctx",
	"pkg/termrun",
	"pkg/fence",
	"pkg/integration/...",
	"pkg/batontest",
}

// reference lists packages that must exist and must stay outside the core:
// a rename that took one of them out of reach of this test fails it.
var reference = []string{
	"pkg/controller/config",
	"pkg/controller/configchange",
	"pkg/controller/configpublisher",
	"pkg/controller/discovery",
	"pkg/controller/deploymentscheduler",
	"pkg/controller/pipeline",
	"pkg/controller/reconciler",
	"pkg/controller/store",
	"pkg/controller/app",
	"pkg/controller/events",
	"pkg/controller/metrics/reference",
	"internal/demo",
}

// graph is the import graph of a set of packages and their dependencies.
type graph map[string][]string

// goList runs `go list -deps` on patterns (relative to the module) and
// returns the import graph of everything listed, test files excluded.
func goList(t *testing.T, patterns ...string) graph {
	t.Helper()
	gobin := goBinary(t)
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}
	for _, p := range patterns {
		args = append(args, module+"/"+p)
	}
	cmd := exec.Command(gobin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	g := graph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	return g
}

// inCore reports whether pkg is matched by one of patterns.
func inCore(pkg string, patterns []string) bool {
	for _, p := range patterns {
		full := module + "/" + strings.TrimSuffix(p, "/...")
		if pkg == full || (strings.HasSuffix(p, "/...") && strings.HasPrefix(pkg, full+"/")) {
			return true
		}
	}
	return false
}

// violations returns, for each package of patterns and each package of the
// module outside patterns that it depends on, a shortest import chain from
// the one to the other, as "a -> b -> c".
func violations(t *testing.T, patterns []string) []string {
	t.Helper()
	g := goList(t, patterns...)
	var out []string
	var roots []string
	for pkg := range g {
		if inCore(pkg, patterns) {
			roots = append(roots, pkg)
		}
	}
	slices.Sort(roots)
	for _, root := range roots {
		// Breadth first, so the chain reported is a shortest one.
		parent := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			pkg := queue[0]
			queue = queue[1:]
			for _, imp := range g[pkg] {
				if _, ok := parent[imp]; ok || !strings.HasPrefix(imp, module+"/") {
					continue
				}
				parent[imp] = pkg
				if !inCore(imp, patterns) {
					out = append(out, chain(parent, imp))
					continue
				}
				queue = append(queue, imp)
			}
		}
	}
	return out
}

func chain(parent map[string]string, pkg string) string {
	var c []string
	for p := pkg; p != ""; p = parent[p] {
		c = append(c, strings.TrimPrefix(p, module+"/"))
	}
	slices.Reverse(c)
	return strings.Join(c, " -> ")
}

// TestCoreDependsOnNoReferencePackage is the rule of the layout: the core
// imports, transitively, nothing of this module outside the core.
func TestCoreDependsOnNoReferencePackage(t *testing.T) {
	for _, v := range violations(t, core) {
		t.Errorf("core package depends on a package outside the core: %s", v)
	}
}

// TestExamplesUseOnlyTheCore: the examples show the library as a stranger
// uses it, so they import the core and nothing of the reference controller.
func TestExamplesUseOnlyTheCore(t *testing.T) {
	g := goList(t, "examples/...")
	for pkg, imps := range g {
		if !strings.HasPrefix(pkg, module+"/examples/") {
			continue
		}
		for _, imp := range imps {
			if strings.HasPrefix(imp, module+"/") && !inCore(imp, core) && !strings.HasPrefix(imp, module+"/examples/") {
				t.Errorf("%s imports %s, which is not in the core", strings.TrimPrefix(pkg, module+"/"), strings.TrimPrefix(imp, module+"/"))
			}
		}
	}
}

// TestExamplesTestsUseOnlyPublicPackages: a user copies an example with its test, so
// the tests import nothing internal to this module either.
func TestExamplesTestsUseOnlyPublicPackages(t *testing.T) {
	gobin := goBinary(t)
	out, err := exec.Command(gobin, "list", "-f", "{{.ImportPath}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", module+"/examples/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	tested := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 {
			tested++
		}
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module+"/internal/") || (strings.HasPrefix(imp, module+"/") && !inCore(imp, core) && !strings.HasPrefix(imp, module+"/examples/")) {
				t.Errorf("the tests of %s import %s, which a user cannot", strings.TrimPrefix(f[0], module+"/"), strings.TrimPrefix(imp, module+"/"))
			}
		}
	}
	if tested == 0 {
		t.Error("no example has a test")
	}
}

// TestCheckerSeesAViolation proves the checker can fail: the reference
// controller's app, taken as if it were core, depends on packages outside
// that set, and the chain names them.
func TestCheckerSeesAViolation(t *testing.T) {
	v := violations(t, append(slices.Clone(core), "pkg/controller/app"))
	found := false
	for _, c := range v {
		if strings.HasPrefix(c, "pkg/controller/app -> ") && strings.HasSuffix(c, " -> pkg/controller/config") {
			found = true
		}
	}
	if !found {
		t.Errorf("no chain from pkg/controller/app to pkg/controller/config among %q", v)
	}
}

// TestReferencePackagesExist keeps the lists honest: every reference
// package named above exists and is not matched by a core pattern.
func TestReferencePackagesExist(t *testing.T) {
	g := goList(t, reference...)
	for _, p := range reference {
		full := module + "/" + p
		if _, ok := g[full]; !ok {
			t.Errorf("reference package %s not found", p)
		}
		if inCore(full, core) {
			t.Errorf("reference package %s is matched by a core pattern", p)
		}
	}
}

// TestArrows checks the narrower rules of the architecture: the bus knows
// nothing of leadership or Kubernetes, the pure election nothing of the bus,
// the term accessor nothing of either.
func TestArrows(t *testing.T) {
	rules := []struct {
		pkg    string
		banned []string // import path prefixes
	}{
		{"pkg/events/...", []string{module + "/pkg/controller", module + "/pkg/k8s", "k8s.io/", "sigs.k8s.io/"}},
		{"pkg/k8s/leaderelection/...", []string{module + "/pkg/events", module + "/pkg/controller"}},
		{"pkg/k8s/sharding/...", []string{module + "/pkg/events", module + "/pkg/controller"}},
		{"pkg/k8s/incarnation", []string{module + "/pkg/events", module + "/pkg/controller"}},
		// The watch loop knows nothing of the module above it.
		{"pkg/k8s/internal/kwatch", []string{module + "/pkg/events", module + "/pkg/controller", module + "/pkg/k8s/leaderelection",
			module + "/pkg/k8s/sharding", module + "/pkg/k8s/incarnation"}},
		// The term accessor sits below both the elector and the runtime.
		{"pkg/termctx", []string{module + "/pkg/events", module + "/pkg/controller", module + "/pkg/k8s", "k8s.io/"}},
		// The per-term runner sits below the runtime and the sharder: the
		// standard library and the term model only.
		{"pkg/termrun", []string{module + "/pkg/events", module + "/pkg/controller", module + "/pkg/k8s", "k8s.io/", "sigs.k8s.io/"}},
	}
	for _, r := range rules {
		g := goList(t, r.pkg)
		for pkg := range g {
			for _, b := range r.banned {
				if strings.HasPrefix(pkg, b) {
					t.Errorf("%s depends on %s", r.pkg, pkg)
				}
			}
		}
	}
}

func Example_chain() {
	parent := map[string]string{
		module + "/pkg/controller/lifecycle": "",
		module + "/pkg/controller/events":    module + "/pkg/controller/lifecycle",
		module + "/pkg/controller/config":    module + "/pkg/controller/events",
	}
	fmt.Println(chain(parent, module+"/pkg/controller/config"))
	// Output: pkg/controller/lifecycle -> pkg/controller/events -> pkg/controller/config
}

// goBinary returns the go command the test lists packages with: the one on
// PATH, the one that runs the tests.
func goBinary(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the layout tests list packages with the go command, which is not on PATH: %v", err)
	}
	return gobin
}
