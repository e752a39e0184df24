package crbench

import (
	"strings"
	"testing"
	"time"
)

// TestCrashTimings: BATON_CRASH_TIMINGS takes one or more lease,renew,retry triples
// separated by spaces, and refuses bad input naming it.
func TestCrashTimings(t *testing.T) {
	tms, err := crashTimings(" 15s,10s,2s  60s,45s,5s ")
	if err != nil {
		t.Fatal(err)
	}
	want := []timings{{15 * time.Second, 10 * time.Second, 2 * time.Second}, {60 * time.Second, 45 * time.Second, 5 * time.Second}}
	if len(tms) != 2 || tms[0] != want[0] || tms[1] != want[1] {
		t.Fatalf("crashTimings = %v, want %v", tms, want)
	}
	if got := tms[1].String(); got != "60s/45s/5s" {
		t.Errorf("String() = %q, want 60s/45s/5s", got)
	}
	if got := (timings{3 * time.Second, 2 * time.Second, 400 * time.Millisecond}).String(); got != "3s/2s/400ms" {
		t.Errorf("String() = %q, want 3s/2s/400ms", got)
	}
	for _, bad := range []string{"", "15s,10s", "15s,10s,2s,1s", "15s,x,2s", "10s,15s,2s", "15s,10s,0s", "15s,10s,-2s"} {
		if _, err := crashTimings(bad); err == nil || (bad != "" && !strings.Contains(err.Error(), bad)) {
			t.Errorf("crashTimings(%q) = %v, want an error naming the input", bad, err)
		}
	}
}

// TestCrashTable: the table has a row per implementation and timing with the median
// and max of both measures, the death takeovers of the Baton rows, and the ratios of
// the medians to client-go's.
func TestCrashTable(t *testing.T) {
	tm := timings{15 * time.Second, 10 * time.Second, 2 * time.Second}
	s := func(ds ...int) []time.Duration {
		out := make([]time.Duration, len(ds))
		for i, d := range ds {
			out[i] = time.Duration(d) * time.Millisecond
		}
		return out
	}
	rs := map[string]*crashResult{
		"15s/10s/2s client-go":      {crash: s(14000, 16000, 20000), afterReport: s(13500, 15500, 19500), report: s(500, 500, 500), byDeath: -1},
		"15s/10s/2s cr-stock":       {crash: s(15000, 18000, 17000), afterReport: s(14500, 17500, 16500), report: s(500, 500, 500), byDeath: -1},
		"15s/10s/2s baton-cr":       {crash: s(13000, 14000, 15000), afterReport: s(12500, 13500, 14500), report: s(500, 500, 500), byDeath: 0},
		"15s/10s/2s baton-cr-death": {crash: s(540, 560, 800), afterReport: s(40, 60, 300), report: s(500, 500, 500), byDeath: 3},
	}
	var out strings.Builder
	printCrashTable(&out, []timings{tm}, 3, 500*time.Millisecond, rs)
	got := out.String()
	for _, want := range []string{
		"500ms after the SIGKILL",
		"15s/10s/2s  client-go       16s",
		"1.00x",
		"15s/10s/2s  baton-cr-death  560ms                800ms  60ms                      300ms  3 of 3",
		"0 of 3",
		"15s/10s/2s: median SIGKILL→term of client-go 28.6x, cr-stock 30.4x, baton-cr (no death signal) 25.0x that of baton-cr-death",
		"status write sent at +500ms",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}
