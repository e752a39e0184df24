package batontest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func stamped(ns, name, term string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"t": term}}}
}

func TestMonitorFlagsAStampGoingBack(t *testing.T) {
	m := &StampMonitor{annotation: "t", last: map[string]uint64{}}
	m.observe(stamped("a", "x", "5"))
	m.observe(stamped("a", "x", "5"))
	m.observe(stamped("a", "y", "3")) // another object: its own history
	m.observe(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x"}})
	m.observe(stamped("a", "x", "7"))
	if err := m.Err(); err != nil {
		t.Fatalf("no stamp went back, got %v", err)
	}
	m.observe(stamped("a", "x", "6"))
	m.observe(stamped("a", "x", "junk"))
	err := m.Err()
	if err == nil || !strings.Contains(err.Error(), "went back from 7 to 6") || !strings.Contains(err.Error(), "bad term stamp") {
		t.Fatalf("got %v, want the step back and the bad stamp", err)
	}
	if m.Seen() != 6 {
		t.Fatalf("seen %d, want 6", m.Seen())
	}
}
