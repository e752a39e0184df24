package pipeline_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/pipeline"
)

// BenchmarkExecute measures a whole render and validate of the test
// configuration (2 frontends, 2 backends) for 10, 100 and 1000 ready pods,
// so 2N server lines. Render and Validate alone, over the same input, are
// the baselines that show where the time goes.
func BenchmarkExecute(b *testing.B) {
	ctx := context.Background()
	p := pipeline.NewDefault()
	for _, n := range []int{10, 100, 1000} {
		in := pipeline.Input{Config: testConfig(), ConfigVersion: "v1", Pods: pods(n), PodGeneration: 1}
		res, err := p.Execute(ctx, in)
		if err != nil || !res.Valid() {
			b.Fatalf("Execute: %v %v", err, res.Err())
		}
		out := res.Output
		b.Run(fmt.Sprintf("Execute/pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(out)))
			for b.Loop() {
				if _, err := p.Execute(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("Render/pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(out)))
			r := pipeline.DefaultRenderer()
			for b.Loop() {
				if _, err := r.Render(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("Validate/pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(out)))
			var v pipeline.HAProxyValidator
			for b.Loop() {
				if errs, _ := v.Validate(ctx, out); errs != nil {
					b.Fatal(errs)
				}
			}
		})
	}
}
