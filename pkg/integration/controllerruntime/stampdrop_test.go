package controllerruntime

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestFencedClientJSONPatchKeepsTheStamp (issue 25, 6): a caller's JSON patch that
// replaces or removes metadata.annotations as a whole (or metadata itself) no longer
// drops the writer's stamps: they are set after the caller's operations, and so is
// the version the patch is checked against.
func TestFencedClientJSONPatchKeepsTheStamp(t *testing.T) {
	raw := newClient(t)
	ns := newNamespace(t, raw)
	ctx := context.Background()
	f := NewFencedClient(raw)
	cur, end := fakeTerm(7)
	defer end()
	for name, ops := range map[string]string{
		"replace annotations": `[{"op":"replace","path":"/metadata/annotations","value":{"x":"y"}}]`,
		"remove annotations":  `[{"op":"remove","path":"/metadata/annotations"}]`,
		"remove, then add one": `[{"op":"remove","path":"/metadata/annotations"},` +
			`{"op":"add","path":"/metadata/annotations","value":{"x":"y"}}]`,
		"set to null": `[{"op":"add","path":"/metadata/annotations","value":null}]`,
	} {
		obj := configMap(ns, "")
		obj.GenerateName = "drop-"
		obj.Annotations = map[string]string{TermAnnotation: "3", "other": "z"}
		if err := raw.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		err := f.Patch(cur, obj.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(ops)))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var got corev1.ConfigMap
		if err := raw.Get(ctx, client.ObjectKeyFromObject(obj), &got); err != nil {
			t.Fatal(err)
		}
		if got.Annotations[TermAnnotation] != "7" {
			t.Errorf("%s: annotations %v after the fenced JSON patch, want the stamp of term 7", name, got.Annotations)
		}
	}
}

// TestJSONPatchStampsGoLast: the stamping operations follow the caller's, over an
// object whose annotations the caller's operations leave or remove, and a move or copy
// onto metadata.annotations is refused with ErrUnstampablePatch.
func TestJSONPatchStampsGoLast(t *testing.T) {
	p := &stampedPatch{stamps: stamps{TermAnnotation: "7"}, version: "42", hadAnnotations: true}
	for _, tc := range []struct {
		ops  string
		want string // the operations appended
	}{
		{`[{"op":"replace","path":"/data/k","value":"v"}]`,
			`[{"op":"add","path":"/metadata/annotations/baton.dev~1term","value":"7"},{"op":"add","path":"/metadata/resourceVersion","value":"42"}]`},
		{`[{"op":"remove","path":"/metadata/annotations"}]`,
			`[{"op":"add","path":"/metadata/annotations","value":{"baton.dev/term":"7"}},{"op":"add","path":"/metadata/resourceVersion","value":"42"}]`},
		{`[{"op":"replace","path":"/metadata","value":{"name":"n","annotations":{"a":"b"}}}]`,
			`[{"op":"add","path":"/metadata/annotations/baton.dev~1term","value":"7"},{"op":"add","path":"/metadata/resourceVersion","value":"42"}]`},
		{`[{"op":"add","path":"/metadata/resourceVersion","value":"1"}]`,
			`[{"op":"add","path":"/metadata/annotations/baton.dev~1term","value":"7"},{"op":"add","path":"/metadata/resourceVersion","value":"42"}]`},
	} {
		p.inner = client.RawPatch(types.JSONPatchType, []byte(tc.ops))
		data, err := p.Data(nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.ops, err)
		}
		var got, caller, appended []json.RawMessage
		_ = json.Unmarshal(data, &got)
		_ = json.Unmarshal([]byte(tc.ops), &caller)
		_ = json.Unmarshal([]byte(tc.want), &appended)
		if len(got) != len(caller)+len(appended) {
			t.Fatalf("%s: %s, want the caller's operations followed by %s", tc.ops, data, tc.want)
		}
		tail, _ := json.Marshal(got[len(caller):])
		if string(tail) != tc.want {
			t.Errorf("%s: appended %s, want %s", tc.ops, tail, tc.want)
		}
	}
	for _, ops := range []string{
		`[{"op":"copy","from":"/metadata/labels","path":"/metadata/annotations"}]`,
		`[{"op":"move","from":"/spec","path":"/metadata"}]`,
	} {
		p.inner = client.RawPatch(types.JSONPatchType, []byte(ops))
		if _, err := p.Data(nil); !errors.Is(err, ErrUnstampablePatch) {
			t.Errorf("%s: %v, want ErrUnstampablePatch", ops, err)
		}
	}
}

// TestAdmissionFenceJudgesAWriteThatDropsTheStamp (issue 25, 6): an UPDATE of the
// controller's user that drops the Lease token from an object that carried it is
// judged, and refused: its result carries no token of the current term. Before, the
// policy looked only at the object written, and the write passed unjudged.
func TestAdmissionFenceJudgesAWriteThatDropsTheStamp(t *testing.T) {
	e := newFenceEnv(t)
	ctx := context.Background()
	e.waitPassed(e.token("a"))
	cm := configMap(e.ns, "dropped")
	e.token("a").stamp(cm)
	if err := e.writer.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	e.setHolder("b")
	e.waitRefused(e.token("a"), 20*time.Second)
	drop := cm.DeepCopy()
	drop.Annotations = nil
	drop.Data["k"] = "stale"
	if err := e.writer.Update(ctx, drop); !isFenceDenial(err) {
		t.Errorf("an update that drops the token of an old term: %v, want the fence to refuse it", err)
	}
	// The current holder's write over it carries its own token and passes.
	cur := cm.DeepCopy()
	e.token("b").stamp(cur)
	if err := e.writer.Update(ctx, cur); err != nil {
		t.Errorf("the current holder's update: %v", err)
	}
}

// TestShardedAdmissionFenceJudgesAWriteThatDropsTheStamp is
// TestAdmissionFenceJudgesAWriteThatDropsTheStamp for a shard's Lease.
func TestShardedAdmissionFenceJudgesAWriteThatDropsTheStamp(t *testing.T) {
	e := newShardFenceEnv(t)
	ctx := context.Background()
	e.waitPassed(e.shardToken(0, "a"))
	cm := configMap(e.ns, "dropped")
	e.shardToken(0, "a").stamp(cm)
	if err := e.writer.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	e.setShardHolder(0, "b")
	e.waitRefused(e.shardToken(0, "a"), 20*time.Second)
	drop := cm.DeepCopy()
	drop.Annotations = map[string]string{"other": "x"}
	if err := e.writer.Update(ctx, drop); !isFenceDenial(err) {
		t.Errorf("an update that drops shard 0's token of an old term: %v, want the fence to refuse it", err)
	}
	del := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "dropped"}}
	if err := e.writer.Delete(ctx, del); !isFenceDenial(err) {
		t.Errorf("a delete of an object stamped with shard 0's old term: %v, want the fence to refuse it", err)
	}
}
