package controllerruntime

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/baton-dev/baton/pkg/k8s/incarnation"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// TestDeathSignalOption: by default the death signal is on in a pod and off outside
// one; true requires a pod, false turns it off; a partial pod environment is an error
// naming the missing variables and the field.
func TestDeathSignalOption(t *testing.T) {
	inPod := map[string]string{
		incarnation.EnvPodNamespace: "ns", incarnation.EnvPodName: "op-0",
		incarnation.EnvPodUID: "0f1e2d3c-0000-4000-8000-000000000002", incarnation.EnvContainer: "manager",
	}
	partial := map[string]string{incarnation.EnvPodUID: "0f1e2d3c-0000-4000-8000-000000000002"}
	for _, tc := range []struct {
		name    string
		option  *bool
		env     map[string]string
		on      bool
		wantErr []string
		wantLog string
	}{
		{name: "default in a pod", env: inPod, on: true, wantLog: "death signal on"},
		{name: "default not in a pod", wantLog: "not running in a pod"},
		{name: "default partial", env: partial, wantErr: []string{"DeathSignal", "POD_NAMESPACE", "POD_NAME", "CONTAINER_NAME"}},
		{name: "true in a pod", option: ptr.To(true), env: inPod, on: true, wantLog: "death signal on"},
		{name: "true not in a pod", option: ptr.To(true), wantErr: []string{"DeathSignal", "not running in a pod"}},
		{name: "false in a pod", option: ptr.To(false), env: inPod, wantLog: "DeathSignal false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{incarnation.EnvPodNamespace, incarnation.EnvPodName, incarnation.EnvPodUID, incarnation.EnvContainer} {
				t.Setenv(k, tc.env[k])
			}
			logFile := filepath.Join(t.TempDir(), "termination-log")
			o := Options{DeathSignal: tc.option, TerminationMessagePath: logFile}
			var logs bytes.Buffer
			var election k8sle.Config
			w, err := o.deathSignal(&election, fake.NewClientset(), slog.New(slog.NewTextHandler(&logs, nil)))
			if tc.wantErr != nil {
				if !errors.Is(err, ErrInvalidOptions) {
					t.Fatalf("error %v, want one wrapping ErrInvalidOptions", err)
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
			if inc.PodName != "op-0" || inc.Container != "manager" {
				t.Errorf("incarnation %+v, want pod op-0, container manager", inc)
			}
			msg, err := os.ReadFile(logFile)
			if err != nil || !strings.Contains(string(msg), inc.TerminationLine()) {
				t.Errorf("termination message file %q (%v), want %q", msg, err, inc.TerminationLine())
			}
			w.Wait()
		})
	}
}
