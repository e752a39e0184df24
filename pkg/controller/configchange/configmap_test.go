package configchange_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configchange"
	"github.com/baton-dev/baton/pkg/controller/events"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// await returns the next event, failing after a bound generous enough for a
// loaded machine; the API server's watch is real, so this cannot be a bubble.
func await(t *testing.T, ch <-chan busevents.Event) busevents.Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s")
		return nil
	}
}

func TestConfigMapSource(t *testing.T) {
	env := batontest.StartEnv(t)
	cs := env.Clientset()
	ctx := t.Context()
	cms := cs.CoreV1().ConfigMaps("default")

	src, err := configchange.ConfigMap(cs, "default", "baton-config", "")
	if err != nil {
		t.Fatal(err)
	}
	if src.String() != "configmap:default/baton-config#config.yaml" {
		t.Errorf("String = %q", src.String())
	}
	r := newRig(t, src, nil)
	r.run(t)

	// Absent at start: reported once the informer synced, so /readyz can pass.
	inv := await(t, r.ch).(*events.ConfigInvalidEvent)
	if len(inv.Errors) != 1 || inv.Errors[0].Error() != "configchange: configmap default/baton-config not found" {
		t.Errorf("absent configmap: %v", inv.Errors)
	}
	if !r.h.Synced() {
		t.Error("not synced after the informer synced")
	}

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "baton-config"},
		Data:       map[string]string{"config.yaml": docA},
	}
	cm, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, vA, _ := config.Load([]byte(docA))
	if v := await(t, r.ch).(*events.ConfigValidatedEvent); v.Version != vA || v.Source != src.String() {
		t.Errorf("created: %+v", v)
	}

	cm.Data["config.yaml"] = docBad
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	inv = await(t, r.ch).(*events.ConfigInvalidEvent)
	if !errors.Is(inv.Errors[0], config.ErrInvalid) || !strings.Contains(inv.Errors[0].Error(), "frontends[0].bind") {
		t.Errorf("bad content: %v", inv.Errors)
	}

	cm.Data = map[string]string{"other.yaml": docB}
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	inv = await(t, r.ch).(*events.ConfigInvalidEvent)
	if inv.Errors[0].Error() != `configchange: configmap default/baton-config has no key "config.yaml"` {
		t.Errorf("missing key: %v", inv.Errors)
	}

	cm.Data = nil
	cm.BinaryData = map[string][]byte{"config.yaml": []byte(docB)}
	if _, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, vB, _ := config.Load([]byte(docB))
	if v := await(t, r.ch).(*events.ConfigValidatedEvent); v.Version != vB {
		t.Errorf("binaryData: version %s, want %s", v.Version, vB)
	}

	if err := cms.Delete(ctx, "baton-config", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := await(t, r.ch).(*events.ConfigInvalidEvent); !ok {
		t.Error("delete was not reported invalid")
	}
	if cur, _ := r.h.Current(); cur.Version != vB {
		t.Errorf("in force after delete: %s, want the last valid %s", cur.Version, vB)
	}
	st := r.h.Stats()
	if st.Validated != 2 || st.Invalid != 4 {
		t.Errorf("stats %+v", st)
	}
}

func TestConfigMapSourceChecksNames(t *testing.T) {
	cs := fake.NewClientset()
	for _, tc := range []struct{ ns, name, key, want string }{
		{"", "n", "", `configchange: configmap source: namespace ""`},
		{"ns", "N_", "", `configchange: configmap source: name "N_"`},
		{"ns", "n", "a/b", `configchange: configmap source: key "a/b"`},
	} {
		_, err := configchange.ConfigMap(cs, tc.ns, tc.name, tc.key)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ConfigMap(%q, %q, %q) = %v, want prefix %q", tc.ns, tc.name, tc.key, err, tc.want)
		}
	}
}
