package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goBlock matches a fenced Go code block.
var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestGuideCodeBlocksCompile builds every ```go block of each guide as a program of
// its own, in a module that requires this repository through a replace, offline.
func TestGuideCodeBlocksCompile(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for _, guide := range []string{"GETTING-STARTED.md"} {
		text, err := os.ReadFile(guide)
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlock.FindAllStringSubmatch(string(text), -1)
		if len(blocks) < 2 {
			t.Fatalf("%s: %d go blocks, want the two programs", guide, len(blocks))
		}
		for i, b := range blocks {
			src := b[1]
			t.Run(guide+"/"+string(rune('a'+i)), func(t *testing.T) {
				if !strings.HasPrefix(src, "package main\n") {
					t.Fatalf("block %d is not a complete program (package main)", i)
				}
				build(t, root, sum, src)
			})
		}
	}
}

func build(t *testing.T, root string, sum []byte, src string) {
	t.Helper()
	dir := t.TempDir()
	mod := "module example.com/guide\n\ngo 1.26.0\n\nrequire github.com/baton-dev/baton v0.0.0\n\nreplace github.com/baton-dev/baton => " + root + "\n"
	for name, content := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "main.go": []byte(src)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"build", "-o", os.DevNull, "."}, {"vet", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s\n--- main.go ---\n%s", strings.Join(args, " "), err, out, src)
		}
	}
}
