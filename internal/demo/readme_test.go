package demo

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReadmeFaultOrderIsTheDefaultRuns: the README lists the faults of `baton demo`
// in the order a default run makes them.
func TestReadmeFaultOrderIsTheDefaultRuns(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(raw), "It fails the leader")
	if !ok {
		t.Fatal(`README.md: no paragraph "It fails the leader ..."`)
	}
	para, _, _ = strings.Cut(para, "\n\n")
	// Each fault is named by its word; the descriptions use no other fault's word.
	words := map[string]Fault{"hangs": FaultHang, "kill": FaultKill, "release": FaultRelease, "pause": FaultPause, "crash": FaultCrash}
	var said []Fault
	for _, w := range regexp.MustCompile(`[a-z]+`).FindAllString(para, -1) {
		if f, ok := words[w]; ok {
			said = append(said, f)
		}
	}
	o := DefaultOptions()
	if want := Schedule(o.Seed, o.Failovers); !slices.Equal(said, want) {
		t.Errorf("README.md names the faults %v, a default run makes %v", said, want)
	}
}
