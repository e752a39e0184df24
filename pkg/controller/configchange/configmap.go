package configchange

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// DefaultKey is the ConfigMap key that holds the document when ConfigMap is
// given none.
const DefaultKey = "config.yaml"

// ConfigMap returns a source that watches the ConfigMap namespace/name with
// a client-go informer and delivers its key (DefaultKey when empty, looked
// up in data, then in binaryData). Once the informer has synced it delivers
// the current document, then one per change of the ConfigMap's
// resourceVersion; an absent ConfigMap or key is delivered as a Document
// with the error. Changes that arrive while the handler is busy coalesce:
// the source always delivers the newest state.
func ConfigMap(clientset kubernetes.Interface, namespace, name, key string) (Source, error) {
	if clientset == nil {
		return nil, errors.New("configchange: configmap source: clientset is nil")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("configchange: configmap source: namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("configchange: configmap source: name %q: %s", name, strings.Join(errs, "; "))
	}
	if key == "" {
		key = DefaultKey
	}
	if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
		return nil, fmt.Errorf("configchange: configmap source: key %q: %s", key, strings.Join(errs, "; "))
	}
	return &configMapSource{clientset: clientset, namespace: namespace, name: name, key: key}, nil
}

type configMapSource struct {
	clientset       kubernetes.Interface
	namespace, name string
	key             string
}

func (s *configMapSource) String() string {
	return "configmap:" + s.namespace + "/" + s.name + "#" + s.key
}

func (s *configMapSource) Run(ctx context.Context, emit func(Document)) error {
	client := s.clientset.CoreV1().ConfigMaps(s.namespace)
	selector := fields.OneTermEqualSelector("metadata.name", s.name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.Watch(ctx, o)
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, cache.Indexers{})

	// The handlers only note that something changed; the loop below reads
	// the newest state from the informer's store, so deliveries can neither
	// reorder nor go stale.
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}); err != nil {
		return fmt.Errorf("configchange: configmap source: %w", err)
	}

	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		informer.RunWithContext(ctx)
	}()
	defer func() { <-runDone }()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return nil // ctx ended
	}

	storeKey := s.namespace + "/" + s.name
	last := "" // resourceVersion last delivered, "-" for absent
	for {
		obj, exists, err := informer.GetStore().GetByKey(storeKey)
		var cm *corev1.ConfigMap
		if err == nil && exists {
			cm, _ = obj.(*corev1.ConfigMap)
		}
		seen := "-"
		if cm != nil {
			seen = cm.ResourceVersion
		}
		if seen != last {
			last = seen
			emit(s.document(cm))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// document turns the ConfigMap (nil when absent) into a Document.
func (s *configMapSource) document(cm *corev1.ConfigMap) Document {
	if cm == nil {
		return Document{Err: fmt.Errorf("configchange: configmap %s/%s not found", s.namespace, s.name)}
	}
	if v, ok := cm.Data[s.key]; ok {
		return Document{Raw: []byte(v)}
	}
	if v, ok := cm.BinaryData[s.key]; ok {
		return Document{Raw: v}
	}
	return Document{Err: fmt.Errorf("configchange: configmap %s/%s has no key %q", s.namespace, s.name, s.key)}
}
