package controller_test

// The test in this file keeps LEADER_ONLY_COMPONENTS.md in step with the
// code: every leadership.NewStateReplayer[...] call site and every package
// that subscribes with SubscribeLeaderOnly must be listed in it, and
// everything it lists must exist. examples/ is user code, not the inventory.

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	docName         = "LEADER_ONLY_COMPONENTS.md"
	leadershipPath  = "github.com/baton-dev/baton/pkg/controller/leadership"
	leaderOnlyTitle = "## Leader-only components"
	// busDir is the generic bus, which defines SubscribeLeaderOnly; it and
	// its helper packages are not components.
	busDir          = "pkg/events"
	allReplicaTitle = "## All-replica components"
)

// site is a call site: the package directory, relative to the module root
// with forward slashes, and for replayers the event type's name.
type site struct {
	dir  string
	typ  string // "" for leader-only subscriptions
	pos  string // file:line, for messages
	line int    // doc line, for messages
}

func (s site) key() string { return s.dir + " " + s.typ }

func TestLeaderOnlyComponentsDocument(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	replayers, leaderOnly, err := scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(replayers) == 0 || len(leaderOnly) == 0 {
		t.Fatalf("found %d replayer and %d leader-only call sites under %s: the scan is broken", len(replayers), len(leaderOnly), root)
	}
	doc, err := os.ReadFile(docName)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range check(string(doc), replayers, leaderOnly) {
		t.Error(p)
	}
	for _, s := range replayers {
		t.Logf("replayer %s %s (%s)", s.dir, s.typ, s.pos)
	}
	for _, s := range leaderOnly {
		t.Logf("leader-only %s (%s)", s.dir, s.pos)
	}
}

// TestCheckerCatchesDrift proves the checker on a module made up for the
// test: a call site missing from the document, a stale row and an aliased
// import are all reported, and a matching document passes.
func TestCheckerCatchesDrift(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	write("pkg/a/a.go", `package a

import (
	lead "`+leadershipPath+`"
	ev "example.com/m/events"
)

var r = lead.NewStateReplayer[*ev.WidgetEvent](nil)

func start(bus interface{ SubscribeLeaderOnly(string, int, []string) }) {
	bus.SubscribeLeaderOnly("a", 1, nil)
}
`)
	// Not counted: test files, other modules, testdata, and a function of
	// the same name from another package.
	write("pkg/a/a_test.go", "package a\n\nimport \""+leadershipPath+"\"\n\nvar _ = leadership.NewStateReplayer[*X](nil)\n")
	write("tools/go.mod", "module example.com/tools\n")
	write("tools/t.go", "package t\n\nimport \""+leadershipPath+"\"\n\nvar _ = leadership.NewStateReplayer[*Y](nil)\n")
	write("pkg/a/testdata/x.go", "package x\n\nimport \""+leadershipPath+"\"\n\nvar _ = leadership.NewStateReplayer[*Z](nil)\n")
	write("pkg/b/b.go", "package b\n\nimport leadership \"example.com/other\"\n\nvar _ = leadership.NewStateReplayer[*W](nil)\n")
	write("pkg/events/eventstest/e.go", "package eventstest\n\nfunc f(b B) { b.SubscribeLeaderOnly(\"x\", 1, nil) }\n")

	replayers, leaderOnly, err := scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(replayers) != 1 || replayers[0].dir != "pkg/a" || replayers[0].typ != "WidgetEvent" {
		t.Fatalf("replayers %+v", replayers)
	}
	if len(leaderOnly) != 1 || leaderOnly[0].dir != "pkg/a" {
		t.Fatalf("leader-only %+v", leaderOnly)
	}

	good := leaderOnlyTitle + "\n\n| Package | Component |\n|---|---|\n| `pkg/a` | A |\n\n" +
		allReplicaTitle + "\n\n| Package | Replayer |\n|---|---|\n| `pkg/a` | `leadership.NewStateReplayer[*events.WidgetEvent]` |\n"
	if p := check(good, replayers, leaderOnly); len(p) != 0 {
		t.Errorf("a matching document was refused: %q", p)
	}

	missing := leaderOnlyTitle + "\n\n| Package | Component |\n|---|---|\n| `pkg/z` | Z |\n\n" +
		allReplicaTitle + "\n\n| Package | Replayer |\n|---|---|\n| `pkg/a` | `leadership.NewStateReplayer[*events.GadgetEvent]` |\n"
	p := strings.Join(check(missing, replayers, leaderOnly), "\n")
	for _, want := range []string{
		"pkg/a/a.go:8: leadership.NewStateReplayer[WidgetEvent] in pkg/a is not in the replayer table",
		"replayer table line 11 lists NewStateReplayer[GadgetEvent] in pkg/a, which no longer exists",
		"pkg/a/a.go:11: SubscribeLeaderOnly in pkg/a is not in the leader-only table",
		"leader-only table line 5 lists pkg/z, which makes no SubscribeLeaderOnly subscription",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("problems lack %q:\n%s", want, p)
		}
	}
	if p := check("no tables here\n", replayers, leaderOnly); !slices.ContainsFunc(p, func(s string) bool {
		return strings.Contains(s, "has no section")
	}) {
		t.Errorf("a document without the sections passed: %q", p)
	}
}

// moduleRoot walks up from the working directory (the test's package
// directory) to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test directory")
		}
		dir = parent
	}
}

// scan parses every non-test .go file of the module rooted at root, skipping
// nested modules, testdata, vendor and hidden directories and the generic
// bus, and returns the
// NewStateReplayer call sites and the SubscribeLeaderOnly call sites.
func scan(root string) (replayers, leaderOnly []site, err error) {
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" {
				return filepath.SkipDir
			}
			if filepath.Dir(path) == root && name == "examples" {
				return filepath.SkipDir // user code, each example documents its own components
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		if dir == busDir || strings.HasPrefix(dir, busDir+"/") {
			return nil
		}
		r, l := calls(fset, f, dir, root)
		replayers = append(replayers, r...)
		leaderOnly = append(leaderOnly, l...)
		return nil
	})
	return replayers, leaderOnly, err
}

// calls finds the call sites in one file.
func calls(fset *token.FileSet, f *ast.File, dir, root string) (replayers, leaderOnly []site) {
	alias := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == leadershipPath {
			alias = "leadership"
			if imp.Name != nil {
				alias = imp.Name.Name
			}
		}
	}
	pos := func(n ast.Node) string {
		p := fset.Position(n.Pos())
		rel, err := filepath.Rel(root, p.Filename)
		if err != nil {
			rel = p.Filename
		}
		return fmt.Sprintf("%s:%d", filepath.ToSlash(rel), p.Line)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "SubscribeLeaderOnly" {
			leaderOnly = append(leaderOnly, site{dir: dir, pos: pos(call)})
			return true
		}
		idx, ok := call.Fun.(*ast.IndexExpr)
		if !ok || alias == "" {
			return true
		}
		sel, ok := idx.X.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "NewStateReplayer" {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); !ok || id.Name != alias {
			return true
		}
		replayers = append(replayers, site{dir: dir, typ: typeName(idx.Index), pos: pos(call)})
		return true
	})
	return replayers, leaderOnly
}

// typeName returns the name of a type argument without pointer or package:
// *events.ConfigValidatedEvent gives ConfigValidatedEvent.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	default:
		return fmt.Sprintf("%T", e)
	}
}

var (
	replayerCell = regexp.MustCompile(`NewStateReplayer\[\*?(?:\w+\.)?(\w+)\]`)
	packageCell  = regexp.MustCompile("^`?([\\w./-]+)`?$")
)

// check compares the document's tables with the call sites and returns one
// message per discrepancy.
func check(doc string, replayers, leaderOnly []site) []string {
	var problems []string
	docReplayers, docLeaderOnly, missing := tables(doc)
	problems = append(problems, missing...)

	listed := map[string]bool{}
	for _, s := range docReplayers {
		listed[s.key()] = true
	}
	exists := map[string]bool{}
	for _, s := range replayers {
		exists[s.key()] = true
		if !listed[s.key()] {
			problems = append(problems, fmt.Sprintf("%s: leadership.NewStateReplayer[%s] in %s is not in the replayer table of %s",
				s.pos, s.typ, s.dir, docName))
		}
	}
	for _, s := range docReplayers {
		if !exists[s.key()] {
			problems = append(problems, fmt.Sprintf("%s: replayer table line %d lists NewStateReplayer[%s] in %s, which no longer exists",
				docName, s.line, s.typ, s.dir))
		}
	}

	listed = map[string]bool{}
	for _, s := range docLeaderOnly {
		listed[s.dir] = true
	}
	exists = map[string]bool{}
	for _, s := range leaderOnly {
		if exists[s.dir] {
			continue
		}
		exists[s.dir] = true
		if !listed[s.dir] {
			problems = append(problems, fmt.Sprintf("%s: SubscribeLeaderOnly in %s is not in the leader-only table of %s", s.pos, s.dir, docName))
		}
	}
	for _, s := range docLeaderOnly {
		if !exists[s.dir] {
			problems = append(problems, fmt.Sprintf("%s: leader-only table line %d lists %s, which makes no SubscribeLeaderOnly subscription",
				docName, s.line, s.dir))
		}
	}
	return problems
}

// tables reads the package column of the table rows in the leader-only
// section, and the rows naming a NewStateReplayer call in the all-replica
// section.
func tables(doc string) (replayers, leaderOnly []site, problems []string) {
	section := ""
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "## ") {
			section = ""
			for _, title := range []string{leaderOnlyTitle, allReplicaTitle} {
				if strings.HasPrefix(line, title) {
					section = title
					seen[title] = true
				}
			}
			continue
		}
		if section == "" || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		first := strings.TrimSpace(cells[0])
		if first == "Package" || strings.Trim(first, "-: ") == "" {
			continue // header or separator
		}
		m := packageCell.FindStringSubmatch(first)
		if m == nil {
			problems = append(problems, fmt.Sprintf("%s: line %d: first cell %q is not a package path", docName, n, first))
			continue
		}
		switch section {
		case leaderOnlyTitle:
			leaderOnly = append(leaderOnly, site{dir: m[1], line: n})
		case allReplicaTitle:
			if r := replayerCell.FindStringSubmatch(line); r != nil {
				replayers = append(replayers, site{dir: m[1], typ: r[1], line: n})
			}
		}
	}
	for _, title := range []string{leaderOnlyTitle, allReplicaTitle} {
		if !seen[title] {
			problems = append(problems, fmt.Sprintf("%s has no section %q", docName, title))
		}
	}
	return replayers, leaderOnly, problems
}
