package incarnation_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
)

func TestStringParse(t *testing.T) {
	got, err := incarnation.Parse(inc.String())
	if err != nil || got != inc {
		t.Fatalf("Parse(%q) = %+v, %v; want %+v", inc.String(), got, err, inc)
	}
	for _, bad := range []string{"", "a/b/c/d", "a/b/c/d/e/f", "ns/pod/uid/c/nothex", "ns//uid/c/" + inc.Nonce, "ns/pod/uid/c/" + strings.ToUpper(inc.Nonce)} {
		if _, err := incarnation.Parse(bad); !errors.Is(err, incarnation.ErrInvalid) {
			t.Errorf("Parse(%q) error = %v, want ErrInvalid", bad, err)
		}
	}
	_, err = incarnation.Parse("ns/pod/uid//xyz")
	if err == nil || !strings.Contains(err.Error(), "container is empty") || !strings.Contains(err.Error(), "nonce") {
		t.Fatalf("error %v does not name the container and the nonce", err)
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLearn(t *testing.T) {
	log := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(log, []byte("left by an earlier run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := incarnation.Learn(incarnation.LearnOptions{
		Getenv: env(map[string]string{"POD_NAMESPACE": "baton", "POD_NAME": "baton-0", "POD_UID": inc.PodUID, "CONTAINER_NAME": "baton"}),
		Random: bytes.NewReader(bytes.Repeat([]byte{0xab}, 16)), TerminationLog: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := inc
	want.Nonce = strings.Repeat("ab", 16)
	if got != want {
		t.Fatalf("Learn = %+v, want %+v", got, want)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want.TerminationLine()+"\n" {
		t.Fatalf("termination log holds %q, want the line alone", b)
	}
}

// TestLearnTerminationLogFromEnvironment: without LearnOptions.TerminationLog, the
// file is the one TERMINATION_MESSAGE_PATH names; the option wins over the variable.
func TestLearnTerminationLogFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	fromEnv, fromOption := filepath.Join(dir, "from-env"), filepath.Join(dir, "from-option")
	vars := map[string]string{"POD_NAMESPACE": "baton", "POD_NAME": "baton-0", "POD_UID": inc.PodUID,
		"CONTAINER_NAME": "baton", incarnation.EnvTerminationLog: fromEnv}
	got, err := incarnation.Learn(incarnation.LearnOptions{Getenv: env(vars)})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(fromEnv); err != nil || string(b) != got.TerminationLine()+"\n" {
		t.Fatalf("%s holds %q (%v), want the nonce line", incarnation.EnvTerminationLog, b, err)
	}
	if _, err := incarnation.Learn(incarnation.LearnOptions{Getenv: env(vars), TerminationLog: fromOption}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fromOption); err != nil {
		t.Fatalf("LearnOptions.TerminationLog was not written: %v", err)
	}
}

func TestLearnNotInPod(t *testing.T) {
	_, err := incarnation.Learn(incarnation.LearnOptions{Getenv: env(nil), TerminationLog: filepath.Join(t.TempDir(), "x")})
	if !errors.Is(err, incarnation.ErrNotInPod) {
		t.Fatalf("error = %v, want ErrNotInPod", err)
	}
}

func TestLearnPartialEnvironment(t *testing.T) {
	_, err := incarnation.Learn(incarnation.LearnOptions{Getenv: env(map[string]string{"POD_NAME": "baton-0", "POD_UID": "u"}),
		TerminationLog: filepath.Join(t.TempDir(), "x")})
	if !errors.Is(err, incarnation.ErrInvalid) || !strings.Contains(err.Error(), "POD_NAMESPACE, CONTAINER_NAME") {
		t.Fatalf("error = %v, want one naming POD_NAMESPACE, CONTAINER_NAME", err)
	}
}

// TestLearnUnwritableLog: an incarnation whose line is not in the file could never be
// proven dead; Learn must fail rather than return it.
func TestLearnUnwritableLog(t *testing.T) {
	_, err := incarnation.Learn(incarnation.LearnOptions{
		Getenv:         env(map[string]string{"POD_NAMESPACE": "baton", "POD_NAME": "baton-0", "POD_UID": "u", "CONTAINER_NAME": "baton"}),
		TerminationLog: filepath.Join(t.TempDir(), "missing-dir", "termination-log"),
	})
	if err == nil || !strings.Contains(err.Error(), "termination message file") {
		t.Fatalf("error = %v, want one about the termination message file", err)
	}
}
