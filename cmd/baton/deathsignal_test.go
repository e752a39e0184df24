package main

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// TestRunDeathSignal: --death-signal is on by default; in a pod the
// elector records the incarnation whose nonce is in the termination
// message file and watches holders' pods; outside a pod, or with
// --death-signal=false, it does neither; a partial pod environment (a
// manifest from before the death signal) turns it off with a warning, and
// is an error naming the missing variables and the flag when
// --death-signal is given.
func TestRunDeathSignal(t *testing.T) {
	inPod := map[string]string{
		incarnation.EnvPodNamespace: "ns", incarnation.EnvPodName: "baton-0",
		incarnation.EnvPodUID: "0f1e2d3c-0000-4000-8000-000000000001", incarnation.EnvContainer: "baton",
	}
	partial := map[string]string{incarnation.EnvPodNamespace: "ns", incarnation.EnvPodName: "baton-0"}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		on      bool
		wantErr []string
		wantLog string
	}{
		{name: "in a pod", env: inPod, on: true, wantLog: "death signal on"},
		{name: "not in a pod", env: nil, wantLog: "not running in a pod"},
		// Development containers set CONTAINER_NAME too.
		{name: "CONTAINER_NAME alone", env: map[string]string{incarnation.EnvContainer: "dev"}, wantLog: "not running in a pod"},
		{name: "partial", env: partial, wantLog: "level=WARN msg=\"death signal off: the pod environment is incomplete"},
		{name: "partial, asked for", args: []string{"--death-signal"}, env: partial, wantErr: []string{"--death-signal", "POD_UID", "CONTAINER_NAME", "--death-signal=false"}},
		{name: "disabled", args: []string{"--death-signal=false"}, env: inPod, wantLog: "--death-signal=false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			var rf runFlags
			rf.register(fs)
			logFile := filepath.Join(t.TempDir(), "termination-log")
			if err := fs.Parse(append([]string{"--termination-message-path=" + logFile}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			rf.getenv = func(k string) string { return tc.env[k] }
			rf.c.Clientset = fake.NewClientset()
			var logs bytes.Buffer
			var election k8sle.Config
			w, err := rf.useDeathSignal(&election, slog.New(slog.NewTextHandler(&logs, nil)))
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error, want one naming %q", tc.wantErr)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not name %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("logs %q, want %q", logs.String(), tc.wantLog)
			}
			if !tc.on {
				if w != nil || election.Incarnation != "" || election.DeathWatch != nil {
					t.Errorf("death signal set (watcher %v, incarnation %q, death watch %v), want off", w, election.Incarnation, election.DeathWatch)
				}
				if _, err := os.Stat(logFile); !os.IsNotExist(err) {
					t.Errorf("termination message file written (%v), want untouched", err)
				}
				return
			}
			if w == nil || election.DeathWatch == nil {
				t.Fatalf("watcher %v, death watch %v: want both", w, election.DeathWatch)
			}
			inc, err := incarnation.Parse(election.Incarnation)
			if err != nil {
				t.Fatalf("recorded incarnation %q: %v", election.Incarnation, err)
			}
			if inc.PodName != "baton-0" || inc.Container != "baton" {
				t.Errorf("incarnation %+v, want pod baton-0, container baton", inc)
			}
			msg, err := os.ReadFile(logFile)
			if err != nil || !strings.Contains(string(msg), inc.TerminationLine()) {
				t.Errorf("termination message file %q (%v), want %q", msg, err, inc.TerminationLine())
			}
			w.Wait()
		})
	}
}

// TestRunDeathSignalDefault: the death signal is on unless turned off.
func TestRunDeathSignalDefault(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var rf runFlags
	rf.register(fs)
	if !rf.deathSignal.v || rf.deathSignal.set || rf.terminationLog != incarnation.DefaultTerminationLog {
		t.Errorf("--death-signal default %v, --termination-message-path %q; want true and %q", rf.deathSignal.v, rf.terminationLog, incarnation.DefaultTerminationLog)
	}
}
