package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/klog/v2"
)

// TestFlagsOutOfRange: a value out of range is refused before the run
// starts, naming the flag the user typed, with one prefix; zero is a value,
// not "the default".
func TestFlagsOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--replicas=0"}, "baton demo: --replicas 0 is out of range"},
		{[]string{"demo", "--replicas=33"}, "baton demo: --replicas 33 is out of range"},
		{[]string{"demo", "--failovers=-1"}, "baton demo: --failovers -1 is negative"},
		{[]string{"demo", "--lease-duration=2m"}, "baton demo: --lease-duration 2m0s is above 1m0s"},
		{[]string{"demo", "--lease-duration=24h"}, "baton demo: --lease-duration: lease duration 24h0m0s is above 1m0s, the demo's maximum"},
		{[]string{"demo", "--lease-duration=0"}, "baton demo: --lease-duration: lease duration 0s is below the minimum 1s"},
		{[]string{"demo", "--dwell=-1s"}, "baton demo: --dwell -1s is negative"},
		{[]string{"demo", "--retry-period=650ms"}, "baton demo: --retry-period: renew deadline 700ms must be greater than 1.2 × retry period 650ms"},
		{[]string{"demo", "--metrics-addr=nocolon"}, `baton demo: --metrics-addr "nocolon"`},
		{[]string{"run", "--identity=a", "--lease-duration=0"}, "baton run: --lease-duration: lease duration 0s is below the minimum 1s"},
		{[]string{"run", "--identity=a", "--lease-duration=2h"}, "baton run: --lease-duration: lease duration 2h0m0s is above the maximum 1h0m0s"},
		{[]string{"run", "--identity=a", "--lease-duration=15500ms"}, "baton run: --lease-duration: lease duration 15.5s is not whole seconds"},
		{[]string{"run", "--identity=a", "--retry-period=50ms"}, "baton run: --retry-period: retry period 50ms is below the minimum 100ms"},
		{[]string{"demo", "--lease-duration=1500ms"}, "baton demo: --lease-duration: lease duration 1.5s is not whole seconds"},
		{[]string{"demo", "--retry-period=50ms"}, "baton demo: --retry-period: retry period 50ms is below the minimum 100ms"},
		{[]string{"run", "--identity=a", "--renew-deadline=20s"}, "baton run: --renew-deadline: lease duration 15s must be greater than renew deadline 20s"},
		{[]string{"run", "--identity=a", "--leader-elect-renew-deadline=20s"}, "baton run: --leader-elect-renew-deadline: lease duration 15s must be greater than renew deadline 20s"},
		{[]string{"run", "--identity=a", "--leader-elect-lease-duration=0"}, "baton run: --leader-elect-lease-duration: lease duration 0s is below the minimum 1s"},
		{[]string{"run", "--identity=a", "--leader-elect-resource-namespace=Bad_NS"}, `baton run: --leader-elect-resource-namespace "Bad_NS"`},
		{[]string{"run", "--identity=a", "--leader-elect=false"}, "baton run: --leader-elect=false: baton run runs its leader-only work only in a term"},
		{[]string{"run", "--identity=a", "--pod-selector=app in (("}, `baton run: --pod-selector "app in (("`},
		{[]string{"run", "--identity=a", "--namespace=Bad_NS"}, `baton run: --namespace "Bad_NS"`},
		{[]string{"run", "--identity=a", "--lease-namespace=Bad_NS"}, `baton run: --lease-namespace "Bad_NS"`},
		{[]string{"run", "--identity=a", "--config-key=a/b"}, `baton run: --config-key "a/b"`},
		{[]string{"run", "--identity=a", "--lease-name="}, `baton run: --lease-name ""`},
		{[]string{"run", "--identity=a", "--log-format=xml"}, `baton run: --log-format "xml"`},
	} {
		code, stdout, stderr := runCmd(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("baton %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr, exitUsage, tc.want)
		}
		if stdout != "" {
			t.Errorf("baton %s: the run started: %q", strings.Join(tc.args, " "), stdout)
		}
		for _, bad := range []string{"demo: demo:", "baton demo: demo", "leaseDuration", "Replicas", "LeaseDuration", "app: "} {
			if strings.Contains(stderr, bad) {
				t.Errorf("baton %s: %q names %q, not the flag", strings.Join(tc.args, " "), stderr, bad)
			}
		}
	}
}

// TestZeroIsAValue: --failovers 0 and --dwell 0 run no failover and no
// dwell (they are not "the default").
func TestZeroIsAValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		code, stdout, stderr := runCmd(t, "demo", "--failovers=0", "--dwell=0", "--live=never")
		if code != exitOK {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		if !strings.Contains(stdout, "0 failovers") || strings.Contains(stdout, "failover 1/") {
			t.Errorf("--failovers 0 ran failovers:\n%s", stdout)
		}
		// It says what it does instead of listing no faults and no time.
		if !strings.Contains(stdout, "no failovers: a leader is elected and checked") || strings.Contains(stdout, "faults in order: ;") || strings.Contains(stdout, "about 0s") {
			t.Errorf("--failovers 0 announces its run badly:\n%s", stdout)
		}
	})
}

// TestBadTimelineBeforeStart: a --timeline (or --log-file) that cannot be
// written is reported at once, not after the run.
func TestBadTimelineBeforeStart(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dir", "t.svg")
	for _, flag := range []string{"--timeline=", "--log-file="} {
		code, stdout, stderr := runCmd(t, "demo", "--live=never", flag+missing)
		if code != exitUsage || !strings.Contains(stderr, "baton demo: "+strings.TrimSuffix(flag, "=")+": ") {
			t.Errorf("%s: exit %d, stderr %q", flag, code, stderr)
		}
		if stdout != "" { // a run that started says so on stdout first
			t.Errorf("%s: the run started: %q", flag, stdout)
		}
	}
}

// TestDemoInterrupted: Ctrl-C (the context ending) mid-run prints the
// partial report, says "interrupted", writes the timeline and exits 130.
func TestDemoInterrupted(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "timeline.svg")
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"demo", "--live=never", "--timeline=" + svg}, &out, &errOut)
		if code != exitInterrupted {
			t.Errorf("exit %d, want %d", code, exitInterrupted)
		}
		stdout := out.String()
		for _, want := range []string{"failover 1/6:", "): interrupted", "SUMMARY", "result: INTERRUPTED", "timeline written"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q", want)
			}
		}
		if strings.Contains(stdout, "FAIL") || strings.Contains(stdout, "no new leader") {
			t.Errorf("an interrupted run reports a failure:\n%s", stdout)
		}
		if !strings.Contains(errOut.String(), "baton demo: interrupted") {
			t.Errorf("stderr %q", errOut.String())
		}
	})
	if fi, err := os.Stat(svg); err != nil || fi.Size() == 0 {
		t.Errorf("timeline: %v", err)
	}
}

// TestDemoSaysWhatItDoes: the run says up front how long it takes and what
// a term number is.
func TestDemoSaysWhatItDoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		code, stdout, _ := runCmd(t, "demo", "--failovers=1", "--live=never")
		if code != exitOK {
			t.Fatalf("exit %d", code)
		}
		lines := strings.SplitN(stdout, "\n", 3)
		if len(lines) < 2 || !strings.Contains(lines[0], "the run takes about") || !strings.Contains(lines[1], "resourceVersion") {
			t.Errorf("first lines:\n%s", stdout)
		}
	})
	code, _, stderr := runCmd(t, "demo", "-h")
	if code != exitOK || !strings.Contains(stderr, "run takes about") {
		t.Errorf("demo -h does not say how long a run takes:\n%s", stderr)
	}
}

// TestKlogThroughSlog: with --log-format json, what client-go logs through
// klog comes out as JSON from the same handler.
func TestKlogThroughSlog(t *testing.T) {
	defer klog.ClearLogger()
	var buf bytes.Buffer
	lf := logFlags{level: "info", format: "json"}
	logger, err := lf.logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	useLogger(logger)
	klog.InfoS("from klog", "key", "value")
	klog.ErrorS(nil, "klog error")
	klog.Flush()
	sc := bufio.NewScanner(&buf)
	var msgs []string
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("not JSON: %q", sc.Text())
		}
		msgs = append(msgs, rec["msg"].(string))
	}
	if strings.Join(msgs, "|") != "from klog|klog error" {
		t.Errorf("messages %q", msgs)
	}
}

func TestVersion(t *testing.T) {
	info := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/baton-dev/baton", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		},
	}
	if got, want := versionString(info), "baton v0.3.0 (0123abcd, modified, 2026-12-01T10:00:00Z) go1.26.8"; got != want {
		t.Errorf("versionString = %q, want %q", got, want)
	}
	if got := versionString(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}); got != "baton (devel) (no VCS revision recorded)" {
		t.Errorf("no VCS: %q", got)
	}
	code, stdout, _ := runCmd(t, "version")
	if code != exitOK || !strings.HasPrefix(stdout, "baton ") {
		t.Errorf("baton version: exit %d, %q", code, stdout)
	}
}

// TestTimingErrorsNameTheFlag: the election's own duration check runs on the
// timing flags of both commands, and each problem it finds is reported on
// its own line under the flag that set the duration.
func TestTimingErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		lease, renew, retry string
		flags               []string // the flag each error line names, in order
	}{
		{"0s", "700ms", "200ms", []string{"--lease-duration"}},
		{"1s", "0s", "200ms", []string{"--renew-deadline"}},
		{"1s", "700ms", "0s", []string{"--retry-period"}},
		{"0s", "0s", "0s", []string{"--lease-duration", "--retry-period", "--renew-deadline"}},
		{"1500ms", "700ms", "200ms", []string{"--lease-duration"}},
		{"1s", "1s", "200ms", []string{"--lease-duration"}},
		{"2s", "1s", "900ms", []string{"--renew-deadline"}},
		{"1s", "700ms", "99ms", []string{"--retry-period"}},
		{"1s", "2s", "2s", []string{"--lease-duration", "--renew-deadline"}},
	} {
		timings := []string{"--lease-duration=" + tc.lease, "--renew-deadline=" + tc.renew, "--retry-period=" + tc.retry}
		for _, args := range [][]string{append([]string{"run", "--identity=a"}, timings...), append([]string{"demo"}, timings...)} {
			code, _, stderr := runCmd(t, args...)
			var got []string
			for line := range strings.Lines(stderr) {
				rest, ok := strings.CutPrefix(line, "baton "+args[0]+": ")
				flag, _, named := strings.Cut(rest, ": ")
				if !ok || !named {
					t.Errorf("baton %s: line %q names no flag", strings.Join(args, " "), line)
					continue
				}
				got = append(got, flag)
			}
			if code != exitUsage || !slices.Equal(got, tc.flags) {
				t.Errorf("baton %s: exit %d, flags named %q, want exit %d and %q\n%s", strings.Join(args, " "), code, got, exitUsage, tc.flags, stderr)
			}
		}
	}
}
