package controllerruntime

import (
	"context"
	"log/slog"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// statusGate is a client whose next subresource patch is held in flight until released:
// what a leader cut off from the API server, whose request is delivered late, sends.
type statusGate struct {
	client.Client
	g gate
}

func (s *statusGate) Status() client.SubResourceWriter {
	return &gatedStatus{SubResourceWriter: s.Client.Status(), g: &s.g}
}

func (s *statusGate) SubResource(name string) client.SubResourceClient {
	sc := s.Client.SubResource(name)
	return struct {
		client.SubResourceReader
		client.SubResourceWriter
	}{sc, &gatedStatus{SubResourceWriter: sc, g: &s.g}}
}

type gatedStatus struct {
	client.SubResourceWriter
	g *gate
}

func (s *gatedStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	ctx = s.g.wait(ctx, "Patch")
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// deployment returns a Deployment that the API server accepts; no controller runs in
// the test's API server, so only the test writes its status.
func deployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example"}}},
			},
		},
	}
}

// TestFencedClientStatusPatchIsACompareAndSwap (issue 25, 1): a leader sends a status
// patch in its live term (a merge patch without the optimistic lock, as
// Status().Patch(MergeFrom(orig)) is), the request is delayed, the next term writes the
// status; the old patch, delivered then, conflicts instead of moving observedGeneration
// back. The same holds for a JSON patch and for SubResource("status"), and for a patch
// of an object given without a resourceVersion (read first).
func TestFencedClientStatusPatchIsACompareAndSwap(t *testing.T) {
	raw := newClient(t)
	ns := newNamespace(t, raw)
	ctx := context.Background()
	sg := &statusGate{Client: raw}
	f := &fencedClient{Client: sg, reader: raw, logger: slog.Default()}
	patches := map[string]func(ctx context.Context, read *appsv1.Deployment) error{
		"Status().Patch(MergeFrom)": func(ctx context.Context, read *appsv1.Deployment) error {
			next := read.DeepCopy()
			next.Status.ObservedGeneration = 1
			return f.Status().Patch(ctx, next, client.MergeFrom(read))
		},
		"SubResource(status) JSON patch": func(ctx context.Context, read *appsv1.Deployment) error {
			return f.SubResource("status").Patch(ctx, read.DeepCopy(),
				client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/status/observedGeneration","value":1}]`)))
		},
		"Status().Patch by name": func(ctx context.Context, read *appsv1.Deployment) error {
			byName := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: read.Namespace, Name: read.Name}}
			return f.Status().Patch(ctx, byName, client.RawPatch(types.MergePatchType, []byte(`{"status":{"observedGeneration":1}}`)))
		},
	}
	i := 0
	for name, patch := range patches {
		i++
		t.Run(name, func(t *testing.T) {
			d := deployment(ns, "d"+uitoa(uint64(i)))
			if err := raw.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			old, endOld := fakeTerm(5)
			defer endOld()
			arrived, release := sg.g.holdNext("Patch")
			errc := make(chan error, 1)
			go func() { errc <- patch(old, d.DeepCopy()) }()
			<-arrived
			endOld()
			// The next term writes the status.
			cur, endCur := fakeTerm(6)
			defer endCur()
			var now appsv1.Deployment
			if err := raw.Get(ctx, client.ObjectKeyFromObject(d), &now); err != nil {
				t.Fatal(err)
			}
			now.Status.ObservedGeneration = 2
			if err := f.Status().Update(cur, &now); err != nil {
				t.Fatal(err)
			}
			close(release)
			if err := <-errc; !apierrors.IsConflict(err) {
				t.Errorf("the old term's status patch delivered after the next term's status write: %v, want a conflict", err)
			}
			if err := raw.Get(ctx, client.ObjectKeyFromObject(d), &now); err != nil {
				t.Fatal(err)
			}
			if now.Status.ObservedGeneration != 2 {
				t.Errorf("observedGeneration %d after the stale patch, want the next term's 2", now.Status.ObservedGeneration)
			}
		})
	}
}
