package configpublisher_test

import (
	"context"
	"maps"
	"strconv"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/store"
)

// BenchmarkWrite is the fenced write of a changed record to the in-memory
// store: read, term check, build, compare-and-swap.
func BenchmarkWrite(b *testing.B) {
	ctx := context.Background()
	s := newMemory(b)
	rec := valid(1, "v", 0)
	b.ReportAllocs()
	var gen uint64
	for b.Loop() {
		gen++
		rec.Content.PodGeneration = gen
		if _, err := configpublisher.Write(ctx, s, rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaselineReadUpdate is the store's own read and compare-and-swap
// of a like object, without the publisher's work around it.
func BenchmarkBaselineReadUpdate(b *testing.B) {
	ctx := context.Background()
	s := newMemory(b)
	s.Set(store.Object{Data: map[string]string{"config.yaml": "v: v"}, Annotations: map[string]string{"n": "0"}})
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		o, err := s.Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n++
		o.Annotations = maps.Clone(o.Annotations) // read-only: change a copy
		o.Annotations["n"] = strconv.Itoa(n)
		if _, err := s.Update(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
}
