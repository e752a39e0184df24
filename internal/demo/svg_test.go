package demo

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTimelineGlyphs: a replica leading without a component is drawn with a mark of
// its own, not the release's, and the kubelet's report of a crash has a mark.
func TestTimelineGlyphs(t *testing.T) {
	start := time.Now()
	r := &Report{Started: start, Duration: 10 * time.Second, Replicas: []string{"baton-0", "baton-1"},
		Marks: []Mark{
			{At: start.Add(time.Second), Kind: MarkStall, Replica: "baton-0", Text: "leads without " + StallComponent},
			{At: start.Add(3 * time.Second), Kind: MarkCrash, Replica: "baton-1", Text: "crashed"},
			{At: start.Add(3 * time.Second), Kind: MarkReport, Replica: "baton-1", Text: "the kubelet reported"},
		}}
	var b strings.Builder
	if err := r.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, want := range []string{
		"⚠<title>baton-0 leads without " + StallComponent,
		"⚑<title>baton-1 the kubelet reported",
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("the timeline lacks %q", want)
		}
	}
	if strings.Contains(svg, "⏏<title>baton-0 leads without") {
		t.Error("leading without a component is drawn with the release's glyph")
	}
}

// TestTimelineShowsTheLastTerm: a run stops right after its last hand-over; the last
// term's bar still has room after it on the axis, and its label is inside the
// drawing.
func TestTimelineShowsTheLastTerm(t *testing.T) {
	start := time.Now()
	end := start.Add(24 * time.Second)
	r := &Report{Started: start, Duration: 24 * time.Second, Replicas: []string{"baton-0", "baton-1"},
		Terms: []TermRecord{
			{Term: 1, Replica: "baton-0", Sent: start, Acquired: start, End: end.Add(-30 * time.Millisecond)},
			{Term: 99999, Replica: "baton-1", Sent: end.Add(-30 * time.Millisecond), Acquired: end.Add(-30 * time.Millisecond), End: end},
		}}
	var b strings.Builder
	if err := r.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	bar := regexp.MustCompile(`<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)" height="\d+" rx="3" fill="[^"]+"><title>term 99999 `).FindStringSubmatch(svg)
	if bar == nil {
		t.Fatalf("no bar of the last term:\n%s", svg)
	}
	x, _ := strconv.ParseFloat(bar[1], 64)
	wd, _ := strconv.ParseFloat(bar[2], 64)
	if right := x + wd; right > svgWidth-svgRight-40 {
		t.Errorf("the last term's bar ends at x=%.1f, at the axis' end (%d): no room for it", right, svgWidth-svgRight)
	}
	label := regexp.MustCompile(`<text x="([0-9.]+)"[^>]*>t99999</text>`).FindStringSubmatch(svg)
	if label == nil {
		t.Fatal("the last term has no label")
	}
	if lx, _ := strconv.ParseFloat(label[1], 64); lx+labelWidth("t99999") > svgWidth {
		t.Errorf("the last term's label at x=%.1f leaves the drawing (%d wide)", lx, svgWidth)
	}
}
