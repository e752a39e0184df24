package batontest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/baton-dev/baton/pkg/batontest"
)

// ginkgo.GinkgoTB() satisfies testing.TB, which is what the kit takes.
var _ testing.TB = ginkgo.GinkgoTB()

// TestGinkgoSuite runs the specs below, as a kubebuilder project's suite_test.go runs
// its own.
func TestGinkgoSuite(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "batontest from Ginkgo")
}

var _ = ginkgo.Describe("the kit in a Ginkgo suite", ginkgo.Ordered, func() {
	var env *batontest.Env

	ginkgo.BeforeAll(func() {
		// The cleanup StartEnv registers through GinkgoTB runs after the container's
		// last spec (Ginkgo's DeferCleanup).
		env = batontest.StartEnv(ginkgo.GinkgoTB(), batontest.WithCRDs(filepath.Join("testdata", "crds")))
	})

	ginkgo.It("checks stamps on a custom resource", func(ctx ginkgo.SpecContext) {
		m := batontest.WatchStampsOf(ginkgo.GinkgoTB(), env.Config(), widgetGVK, "t")
		gomega.Expect(stampWidget(ctx, env.Config(), "ginkgo", 1)).To(gomega.Succeed())
		gomega.Expect(stampWidget(ctx, env.Config(), "ginkgo", 2)).To(gomega.Succeed())
		gomega.Eventually(m.Seen).WithTimeout(30 * time.Second).Should(gomega.Equal(2))
		gomega.Expect(m.Err()).NotTo(gomega.HaveOccurred())
	})

	ginkgo.It("runs and stops replicas", func() {
		rs := batontest.NewReplicas(ginkgo.GinkgoTB(), 2, env.Config())
		started := make(chan struct{})
		rs[0].Run(ginkgo.GinkgoTB(), func(ctx context.Context) error { close(started); <-ctx.Done(); return nil })
		gomega.Eventually(started).WithTimeout(10 * time.Second).Should(gomega.BeClosed())
		gomega.Expect(rs[0].Running()).To(gomega.BeTrue())
		rs[0].Stop(ginkgo.GinkgoTB())
		gomega.Expect(rs[0].Running()).To(gomega.BeFalse())
	})
})
