package deploy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// clientResources are the typed clients the controller may use, by the
// method that returns one: CoreV1().Pods(ns) is "pods".
var clientResources = map[string]string{"Pods": "pods", "ConfigMaps": "configmaps", "Leases": "leases"}

// clientVerbs maps a typed client's methods to the RBAC verbs they need.
var clientVerbs = map[string]string{
	"Get": "get", "List": "list", "Watch": "watch", "Create": "create", "Update": "update",
	"Patch": "patch", "Apply": "patch", "Delete": "delete", "DeleteCollection": "deletecollection",
}

// TestRoleMatchesClientCalls greps the controller's source for the calls
// it makes on Kubernetes clients and checks that the Role grants, per
// resource, exactly their verbs: no verb the code does not call (the Role
// once granted get on pods, which nothing called) and none missing.
//
// It recognises a typed client bound to a variable or field
// (pods := cs.CoreV1().Pods(ns); leases: cs.CoordinationV1().Leases(ns))
// or called in one chain, and the calls on it (pods.List, s.leases.Get).
// Packages that never run in `baton run` (test helpers, the
// controller-runtime integration, whose client the application brings, and
// sharding, a library mode `baton run` does not use) are left out.
func TestRoleMatchesClientCalls(t *testing.T) {
	called := map[string]map[string][]string{} // resource -> verb -> call sites
	for _, root := range []string{"../pkg", "../cmd", "../internal"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				switch d.Name() {
				case "batontest", "integration", "sharding", "testdata":
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			for _, c := range clientCalls(t, path) {
				if called[c.resource] == nil {
					called[c.resource] = map[string][]string{}
				}
				called[c.resource][c.verb] = append(called[c.resource][c.verb], c.site)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The scan must see the calls it exists for; if the code moves to a
	// shape it does not recognise, this fails rather than passing empty.
	for _, res := range []string{"pods", "configmaps", "leases"} {
		if len(called[res]) == 0 {
			t.Fatalf("found no call on %s clients: the scan no longer recognises the code", res)
		}
	}

	role := one[*rbacv1.Role](t, objects(t), "Role")
	granted := map[string]map[string]bool{}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if granted[res] == nil {
				granted[res] = map[string]bool{}
			}
			for _, v := range r.Verbs {
				granted[res][v] = true
			}
		}
	}
	for res, verbs := range called {
		for verb, sites := range verbs {
			if !granted[res][verb] {
				t.Errorf("%s %s is called (%s) but the Role does not grant it", verb, res, strings.Join(sites, ", "))
			}
		}
	}
	for res, verbs := range granted {
		for _, verb := range slices.Sorted(maps.Keys(verbs)) {
			if len(called[res][verb]) == 0 {
				t.Errorf("the Role grants %s on %s, which the code never calls", verb, res)
			}
		}
	}
}

type clientCall struct{ resource, verb, site string }

// clientCalls returns the calls on typed clients in one file.
func clientCalls(t *testing.T, path string) []clientCall {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	// Names (variables, fields) bound to a typed client in this file.
	bound := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, rhs := range n.Rhs {
				if res := clientOf(rhs); res != "" && i < len(n.Lhs) {
					if id, ok := n.Lhs[i].(*ast.Ident); ok {
						bound[id.Name] = res
					}
				}
			}
		case *ast.KeyValueExpr:
			if res := clientOf(n.Value); res != "" {
				if id, ok := n.Key.(*ast.Ident); ok {
					bound[id.Name] = res
				}
			}
		}
		return true
	})
	var out []clientCall
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		verb, ok := clientVerbs[sel.Sel.Name]
		if !ok {
			return true
		}
		res := clientOf(sel.X)
		switch x := sel.X.(type) {
		case *ast.Ident:
			res = bound[x.Name]
		case *ast.SelectorExpr:
			if res == "" {
				res = bound[x.Sel.Name]
			}
		}
		if res != "" {
			pos := fset.Position(call.Pos())
			out = append(out, clientCall{res, verb, strings.TrimPrefix(pos.Filename, "../") + ":" + strconv.Itoa(pos.Line)})
		}
		return true
	})
	return out
}

// clientOf returns the resource of e if e is X.CoreV1().Pods(...) or the
// like, and "" otherwise.
func clientOf(e ast.Expr) string {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	group, ok := sel.X.(*ast.CallExpr)
	if !ok {
		return ""
	}
	if gs, ok := group.Fun.(*ast.SelectorExpr); !ok || !strings.HasSuffix(gs.Sel.Name, "V1") {
		return ""
	}
	return clientResources[sel.Sel.Name]
}
