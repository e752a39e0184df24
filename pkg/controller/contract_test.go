package controller_test

// The test in this file keeps LEADER_ONLY_COMPONENTS.md in step with the
// code: every leadership.NewStateReplayer[...] call site and every
// component registered with a lifecycle Manager's AddLeaderOnly must be
// listed in it, and everything it lists must exist. A component is
// leader-only because it is registered so (its context makes its
// subscriptions leader-only), so the registrations, not the subscribe
// calls, are the inventory. examples/ is user code, not the inventory.

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
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
	// busDir is the generic bus; it and its helper packages are not
	// components.
	busDir          = "pkg/events"
	allReplicaTitle = "## All-replica components"
)

// site is a call site: the package directory, relative to the module root
// with forward slashes, and the type's name: the event type of a
// replayer, the component's type of a leader-only registration.
type site struct {
	dir  string
	typ  string
	pos  string // file:line, for messages
	line int    // doc line, for messages
}

func (s site) key() string { return s.dir + " " + s.typ }

func TestLeaderOnlyComponentsDocument(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	replayers, leaderOnly, problems, err := scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(replayers) == 0 || len(leaderOnly) == 0 {
		t.Fatalf("found %d replayer and %d leader-only registration sites under %s: the scan is broken", len(replayers), len(leaderOnly), root)
	}
	doc, err := os.ReadFile(docName)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(problems, check(string(doc), replayers, leaderOnly)...) {
		t.Error(p)
	}
	for _, s := range replayers {
		t.Logf("replayer %s %s (%s)", s.dir, s.typ, s.pos)
	}
	for _, s := range leaderOnly {
		t.Logf("leader-only %s %s (%s)", s.dir, s.typ, s.pos)
	}
}

// TestCheckerCatchesDrift proves the checker on a module made up for the
// test: a replayer or a leader-only registration missing from the
// document, stale rows, an aliased import, a registration it cannot
// resolve are all reported, and a matching document passes.
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

// Widget is a leader-only component; Plain is another.
type Widget struct{}
type Plain struct{}
`)
	write("pkg/a/new.go", "package a\n\nfunc NewPlain() (*Plain, error) { return &Plain{}, nil }\n")
	write("pkg/c/c.go", `package c

// Gadget is a leader-only component.
type Gadget struct{}
`)
	write("pkg/app/app.go", `package app

import (
	"example.com/m/pkg/a"
	cee "example.com/m/pkg/c"
)

type Component interface{ Name() string }

type replica struct {
	widget *a.Widget
	any    Component
}

func (r *replica) register(m Manager, extra []Component) {
	m.AddLeaderOnly(r.widget)
	m.AddLeaderOnly(&cee.Gadget{})
	p, _ := a.NewPlain()
	m.AddLeaderOnly(p)
	m.AddLeaderOnly(r.any) // an interface: unresolved
	for _, c := range extra {
		m.AddLeaderOnly(c) // unresolved
	}
	for _, c := range extra {
		// inventory: caller-supplied
		m.AddLeaderOnly(c)
	}
}
`)
	// Not counted: test files, other modules, testdata, adapters of
	// caller-supplied components, and a function of the same name from
	// another package.
	write("pkg/a/a_test.go", "package a\n\nimport \""+leadershipPath+"\"\n\nvar _ = leadership.NewStateReplayer[*X](nil)\n\nfunc f(m M) { m.AddLeaderOnly(&Widget{}) }\n")
	write("tools/go.mod", "module example.com/tools\n")
	write("tools/t.go", "package t\n\nimport \""+leadershipPath+"\"\n\nvar _ = leadership.NewStateReplayer[*Y](nil)\n")
	write("pkg/a/testdata/x.go", "package x\n\nimport \""+leadershipPath+"\"\n\nvar _ = leadership.NewStateReplayer[*Z](nil)\n")
	write("pkg/b/b.go", "package b\n\nimport leadership \"example.com/other\"\n\nvar _ = leadership.NewStateReplayer[*W](nil)\n")
	write("pkg/integration/x/x.go", "package x\n\ntype fc struct{}\n\nfunc f(m M) { m.AddLeaderOnly(&fc{}) }\n")
	write("pkg/events/eventstest/e.go", "package eventstest\n\ntype e struct{}\n\nfunc f(m M) { m.AddLeaderOnly(&e{}) }\n")

	replayers, leaderOnly, problems, err := scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(replayers) != 1 || replayers[0].dir != "pkg/a" || replayers[0].typ != "WidgetEvent" {
		t.Fatalf("replayers %+v", replayers)
	}
	var got []string
	for _, s := range leaderOnly {
		got = append(got, s.key()+" "+s.pos)
	}
	want := []string{"pkg/a Widget pkg/app/app.go:16", "pkg/c Gadget pkg/app/app.go:17", "pkg/a Plain pkg/app/app.go:19"}
	if !slices.Equal(got, want) {
		t.Fatalf("leader-only %q, want %q", got, want)
	}
	if len(problems) != 2 || !strings.HasPrefix(problems[0], "pkg/app/app.go:20: cannot tell") ||
		!strings.HasPrefix(problems[1], "pkg/app/app.go:22: cannot tell") {
		t.Fatalf("unresolved registrations reported as %q", problems)
	}

	good := leaderOnlyTitle + "\n\n| Package | Component |\n|---|---|\n| `pkg/a` | `a.Widget` |\n| `pkg/a` | `a.Plain` |\n| `pkg/c` | `c.Gadget` (\"g\") |\n\n" +
		allReplicaTitle + "\n\n| Package | Replayer |\n|---|---|\n| `pkg/a` | `leadership.NewStateReplayer[*events.WidgetEvent]` |\n"
	if p := check(good, replayers, leaderOnly); len(p) != 0 {
		t.Errorf("a matching document was refused: %q", p)
	}

	missing := leaderOnlyTitle + "\n\n| Package | Component |\n|---|---|\n| `pkg/z` | `z.Z` |\n| `pkg/a` | `a.Widget` |\n| `pkg/c` | `c.Gadget` |\n| `pkg/a` | Plain |\n\n" +
		allReplicaTitle + "\n\n| Package | Replayer |\n|---|---|\n| `pkg/a` | `leadership.NewStateReplayer[*events.GadgetEvent]` |\n"
	p := strings.Join(check(missing, replayers, leaderOnly), "\n")
	for _, want := range []string{
		"pkg/a/a.go:8: leadership.NewStateReplayer[WidgetEvent] in pkg/a is not in the replayer table",
		"replayer table line 14 lists NewStateReplayer[GadgetEvent] in pkg/a, which no longer exists",
		"pkg/app/app.go:19: AddLeaderOnly registers a.Plain (pkg/a), which is not in the leader-only table",
		"leader-only table line 5 lists z.Z (pkg/z), which no AddLeaderOnly registers",
		"line 8: the component cell does not start with `a.Type`",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("problems lack %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, "a.Widget") || strings.Contains(p, "c.Gadget") {
		t.Errorf("listed components reported:\n%s", p)
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
// bus, and returns the NewStateReplayer call sites and the components
// registered with AddLeaderOnly (plus a problem for each registration whose
// component it cannot tell).
func scan(root string) (replayers, leaderOnly []site, problems []string, err error) {
	m, err := parseModule(root)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, dir := range slices.Sorted(maps.Keys(m.pkgs)) {
		for _, pf := range m.pkgs[dir] {
			replayers = append(replayers, m.replayerCalls(pf)...)
			if slices.ContainsFunc(callerSupplied, func(p string) bool { return dir == p || strings.HasPrefix(dir, p+"/") }) {
				continue
			}
			l, p := m.registrations(pf)
			leaderOnly = append(leaderOnly, l...)
			problems = append(problems, p...)
		}
	}
	return replayers, leaderOnly, problems, nil
}

// callerSupplied are the directories whose AddLeaderOnly calls register
// components their caller supplies (adapters for user code), not the
// project's own.
var callerSupplied = []string{"pkg/integration"}

// callerMark, in a comment on a registration's line or the line above it,
// says that the component registered there is supplied by the caller and
// belongs to no inventory.
const callerMark = "inventory: caller-supplied"

// module is the parsed module: its path and, per package directory, its
// files.
type module struct {
	root, path string
	fset       *token.FileSet
	pkgs       map[string][]*parsedFile
}

// parsedFile is one file with the package directory it is in and its
// imports by local name.
type parsedFile struct {
	dir     string
	f       *ast.File
	imports map[string]string
}

func parseModule(root string) (*module, error) {
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	m := &module{root: root, path: modfilePath(gomod), fset: token.NewFileSet(), pkgs: map[string][]*parsedFile{}}
	if m.path == "" {
		return nil, errors.New("go.mod names no module")
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			return skipDir(root, path, name)
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		if dir == busDir || strings.HasPrefix(dir, busDir+"/") {
			return nil
		}
		f, err := parser.ParseFile(m.fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		pf := &parsedFile{dir: dir, f: f, imports: map[string]string{}}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			local := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			pf.imports[local] = p
		}
		m.pkgs[dir] = append(m.pkgs[dir], pf)
		return nil
	})
	return m, err
}

// skipDir decides whether the walk enters directory path.
func skipDir(root, path, name string) error {
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

func modfilePath(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

func (m *module) pos(n ast.Node) string {
	p := m.fset.Position(n.Pos())
	rel, err := filepath.Rel(m.root, p.Filename)
	if err != nil {
		rel = p.Filename
	}
	return fmt.Sprintf("%s:%d", filepath.ToSlash(rel), p.Line)
}

// replayerCalls finds the leadership.NewStateReplayer[...] call sites of
// one file.
func (m *module) replayerCalls(pf *parsedFile) (replayers []site) {
	alias := ""
	for local, p := range pf.imports {
		if p == leadershipPath {
			alias = local
		}
	}
	if alias == "" {
		return nil
	}
	ast.Inspect(pf.f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		idx, ok := call.Fun.(*ast.IndexExpr)
		if !ok {
			return true
		}
		sel, ok := idx.X.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "NewStateReplayer" {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); !ok || id.Name != alias {
			return true
		}
		replayers = append(replayers, site{dir: pf.dir, typ: typeName(idx.Index), pos: m.pos(call)})
		return true
	})
	return replayers
}

// registrations finds the AddLeaderOnly(component) calls of one file and
// resolves each component to the package and type it is declared as.
func (m *module) registrations(pf *parsedFile) (leaderOnly []site, problems []string) {
	for _, decl := range pf.f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "AddLeaderOnly" {
				return true
			}
			if dir, typ, ok := m.resolve(pf, fn, call.Args[0]); ok {
				leaderOnly = append(leaderOnly, site{dir: dir, typ: typ, pos: m.pos(call)})
			} else if !m.marked(pf, call) {
				problems = append(problems, fmt.Sprintf("%s: cannot tell which component AddLeaderOnly registers: register a value whose declared type names it, or mark a component supplied by the caller with a comment %q",
					m.pos(call), callerMark))
			}
			return true
		})
	}
	return leaderOnly, problems
}

// marked reports whether a comment on n's line or the line above carries
// callerMark.
func (m *module) marked(pf *parsedFile, n ast.Node) bool {
	line := m.fset.Position(n.Pos()).Line
	for _, g := range pf.f.Comments {
		l := m.fset.Position(g.End()).Line
		if (l == line || l == line-1) && strings.Contains(g.Text(), callerMark) {
			return true
		}
	}
	return false
}

// resolve finds the declared type of arg, an argument of a call in fn: a
// composite literal, a struct field of the package (x.field), or a local
// variable declared with a type, a composite literal or a call to a
// function of the module. It reports false for anything else, and for an
// interface type, which does not tell the component.
func (m *module) resolve(pf *parsedFile, fn *ast.FuncDecl, arg ast.Expr) (dir, typ string, ok bool) {
	switch a := unparen(arg).(type) {
	case *ast.UnaryExpr:
		if lit, isLit := a.X.(*ast.CompositeLit); isLit && a.Op == token.AND {
			return m.typeOf(pf, lit.Type)
		}
	case *ast.CompositeLit:
		return m.typeOf(pf, a.Type)
	case *ast.SelectorExpr:
		if x, isIdent := a.X.(*ast.Ident); isIdent && pf.imports[x.Name] == "" {
			return m.field(pf.dir, a.Sel.Name)
		}
	case *ast.Ident:
		return m.local(pf, fn, a.Name)
	}
	return "", "", false
}

func unparen(e ast.Expr) ast.Expr {
	for {
		p, ok := e.(*ast.ParenExpr)
		if !ok {
			return e
		}
		e = p.X
	}
}

// field resolves the type of the struct field name among the struct types
// of package dir; a name declared with different types is ambiguous.
func (m *module) field(dir, name string) (rdir, rtyp string, ok bool) {
	found := false
	for _, pf := range m.pkgs[dir] {
		ast.Inspect(pf.f, func(n ast.Node) bool {
			st, isStruct := n.(*ast.StructType)
			if !isStruct {
				return true
			}
			for _, f := range st.Fields.List {
				for _, id := range f.Names {
					if id.Name != name {
						continue
					}
					d, t, resolved := m.typeOf(pf, f.Type)
					if found && (!resolved || d != rdir || t != rtyp) {
						ok = false
						return false
					}
					rdir, rtyp, ok, found = d, t, resolved, true
				}
			}
			return true
		})
	}
	return rdir, rtyp, ok && found
}

// local resolves the variable name declared in fn: a parameter, a var
// with a type, or a := from a composite literal or a call of the module.
func (m *module) local(pf *parsedFile, fn *ast.FuncDecl, name string) (dir, typ string, ok bool) {
	for _, f := range fn.Type.Params.List {
		for _, id := range f.Names {
			if id.Name == name {
				return m.typeOf(pf, f.Type)
			}
		}
	}
	var value ast.Expr
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE && len(n.Rhs) >= 1 {
				for i, l := range n.Lhs {
					if id, isIdent := l.(*ast.Ident); isIdent && id.Name == name {
						value = n.Rhs[min(i, len(n.Rhs)-1)]
					}
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if id.Name == name && n.Type != nil {
					value = &ast.CompositeLit{Type: n.Type}
				} else if id.Name == name && i < len(n.Values) {
					value = n.Values[i]
				}
			}
		}
		return value == nil
	})
	if call, isCall := unparen(value).(*ast.CallExpr); isCall {
		return m.result(pf, call)
	}
	if value == nil {
		return "", "", false
	}
	return m.resolve(pf, fn, value)
}

// result resolves the first result type of the module function a call
// calls: pkg.F(...) or F(...).
func (m *module) result(pf *parsedFile, call *ast.CallExpr) (dir, typ string, ok bool) {
	fun := call.Fun
	if idx, isIdx := fun.(*ast.IndexExpr); isIdx {
		fun = idx.X
	}
	dir, name := pf.dir, ""
	switch f := fun.(type) {
	case *ast.Ident:
		name = f.Name
	case *ast.SelectorExpr:
		x, isIdent := f.X.(*ast.Ident)
		if !isIdent {
			return "", "", false
		}
		if dir, ok = m.dirOf(pf.imports[x.Name]); !ok {
			return "", "", false
		}
		name = f.Sel.Name
	}
	for _, target := range m.pkgs[dir] {
		for _, decl := range target.f.Decls {
			fd, isFunc := decl.(*ast.FuncDecl)
			if isFunc && fd.Recv == nil && fd.Name.Name == name && fd.Type.Results != nil {
				return m.typeOf(target, fd.Type.Results.List[0].Type)
			}
		}
	}
	return "", "", false
}

// dirOf maps an import path of the module to its directory.
func (m *module) dirOf(importPath string) (string, bool) {
	rest, ok := strings.CutPrefix(importPath, m.path+"/")
	return rest, ok
}

// typeOf resolves a type expression written in pf to the package
// directory and name of a non-interface type declared in the module.
func (m *module) typeOf(pf *parsedFile, e ast.Expr) (dir, typ string, ok bool) {
	if star, isStar := e.(*ast.StarExpr); isStar {
		e = star.X
	}
	switch t := e.(type) {
	case *ast.Ident:
		dir, typ = pf.dir, t.Name
	case *ast.SelectorExpr:
		x, isIdent := t.X.(*ast.Ident)
		if !isIdent {
			return "", "", false
		}
		if dir, ok = m.dirOf(pf.imports[x.Name]); !ok {
			return "", "", false
		}
		typ = t.Sel.Name
	default:
		return "", "", false
	}
	return dir, typ, m.concrete(dir, typ)
}

// concrete reports whether package dir declares typ as a non-interface
// type.
func (m *module) concrete(dir, typ string) bool {
	for _, pf := range m.pkgs[dir] {
		for _, decl := range pf.f.Decls {
			gd, isGen := decl.(*ast.GenDecl)
			if !isGen || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				if ts := spec.(*ast.TypeSpec); ts.Name.Name == typ {
					_, isInterface := ts.Type.(*ast.InterfaceType)
					return !isInterface
				}
			}
		}
	}
	return false
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
	// componentCell is the leader-only table's second cell: `pkg.Type`.
	componentCell = regexp.MustCompile("^`(\\w+)\\.(\\w+)`")
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
		listed[s.key()] = true
	}
	exists = map[string]bool{}
	for _, s := range leaderOnly {
		if exists[s.key()] {
			continue
		}
		exists[s.key()] = true
		if !listed[s.key()] {
			problems = append(problems, fmt.Sprintf("%s: AddLeaderOnly registers %s.%s (%s), which is not in the leader-only table of %s",
				s.pos, path.Base(s.dir), s.typ, s.dir, docName))
		}
	}
	for _, s := range docLeaderOnly {
		if !exists[s.key()] {
			problems = append(problems, fmt.Sprintf("%s: leader-only table line %d lists %s.%s (%s), which no AddLeaderOnly registers",
				docName, s.line, path.Base(s.dir), s.typ, s.dir))
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
			c := []string(nil)
			if len(cells) > 1 {
				c = componentCell.FindStringSubmatch(strings.TrimSpace(cells[1]))
			}
			if c == nil || path.Base(m[1]) != c[1] {
				problems = append(problems, fmt.Sprintf("%s: line %d: the component cell does not start with `%s.Type`", docName, n, path.Base(m[1])))
				continue
			}
			leaderOnly = append(leaderOnly, site{dir: m[1], typ: c[2], line: n})
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
