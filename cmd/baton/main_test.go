package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "usage: baton <command>"},
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"help"}, exitOK, "commands:"},
		{[]string{"demo", "-h"}, exitOK, "-failovers"},
		{[]string{"run", "-h"}, exitOK, "-lease-namespace"},
		{[]string{"run", "-h"}, exitOK, "-leader-elect-resource-namespace"},
		{[]string{"demo", "extra"}, exitUsage, "unexpected arguments: extra"},
		{[]string{"demo", "--replicas=1"}, exitUsage, "baton demo: --replicas 1 is out of range"},
		{[]string{"demo", "--renew-deadline=2s"}, exitUsage, "baton demo: --renew-deadline: lease duration 1s must be greater than renew deadline 2s"},
		{[]string{"demo", "--lease-duration=3s", "--renew-deadline=3s"}, exitUsage, "baton demo: --lease-duration: lease duration 3s must be greater than renew deadline 3s"},
		{[]string{"demo", "--replica=3"}, exitUsage, "baton demo: flag provided but not defined: -replica (did you mean --replicas?)"},
		{[]string{"run", "--metrics-adr=:8080"}, exitUsage, "(did you mean --metrics-addr?)"},
		{[]string{"run", "--leader-elect-lease=15s"}, exitUsage, "(did you mean --leader-elect-lease-duration?)"},
		{[]string{"demo", "--live=sometimes"}, exitUsage, `--live "sometimes"`},
		{[]string{"demo", "--log-level=loud"}, exitUsage, `--log-level "loud"`},
		{[]string{"demo", "--no-such-flag"}, exitUsage, "flag provided but not defined"},
		{[]string{"run", "--identity=a", "--kubeconfig=/nonexistent/kubeconfig"}, exitUsage, "baton run: --kubeconfig: "},
		{[]string{"version", "extra"}, exitUsage, "unexpected arguments: extra"},
	} {
		code, stdout, stderr := runCmd(t, tc.args...)
		if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
			t.Errorf("baton %s: exit %d, output %q; want exit %d and %q", strings.Join(tc.args, " "), code, stdout+stderr, tc.code, tc.want)
		}
	}
}

// TestRunNamesMissingSettings: without an identity or a pod selector, run
// refuses to start and says which setting is missing.
func TestRunNamesMissingSettings(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAME", "")
	code, _, stderr := runCmd(t, "run", "--kubeconfig="+kc, "--pod-selector=", "--metrics-addr=")
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	for _, want := range []string{"baton run: --identity is empty", "baton run: --pod-selector is empty"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestDemoCommand runs `baton demo` in a bubble: it passes, prints the
// summary and writes a well-formed timeline. Seed 23 kills the leader with
// the kubelet silent, then crashes the next one with the kubelet reporting:
// the output states both takeovers.
func TestDemoCommand(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "timeline.svg")
	synctest.Test(t, func(t *testing.T) {
		code, stdout, stderr := runCmd(t, "demo", "--failovers=2", "--dwell=200ms", "--seed=23", "--live=never", "--timeline="+svg)
		if code != exitOK {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		for _, want := range []string{"failover 1/2: kill", "kubelet silent: the lease was taken 1s after", "failover 2/2: crash",
			"container terminated", "death signal: ", "the next term started 0.0ms after the report",
			"SUMMARY", "result: PASS", "timeline written to " + svg} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q", want)
			}
		}
	})
	f, err := os.Open(svg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("timeline: %v", err)
		}
	}
}
