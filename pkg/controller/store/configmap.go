package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// ConfigMap is a Store backed by one Kubernetes ConfigMap. The API server
// enforces the resourceVersion check of Update. Labels, annotations and data
// written are the whole set: ones other writers added to the ConfigMap are
// kept only if the caller carries them over from Get. Everything the Object
// does not carry (binaryData, owner references, finalizers, ...) is kept as
// it is on the API server.
type ConfigMap struct {
	client    typedcorev1.ConfigMapInterface
	namespace string
	name      string

	// mu guards last, the newest ConfigMap this store read or wrote, which
	// Update starts from when the caller's resourceVersion matches it.
	mu   sync.Mutex
	last *corev1.ConfigMap
}

// NewConfigMap returns a store for the ConfigMap namespace/name. It checks
// that clientset is set and that both names are valid Kubernetes names.
func NewConfigMap(clientset kubernetes.Interface, namespace, name string) (*ConfigMap, error) {
	if clientset == nil {
		return nil, errors.New("store: clientset is nil")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("store: namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("store: configmap name %q: %s", name, strings.Join(errs, "; "))
	}
	return &ConfigMap{client: clientset.CoreV1().ConfigMaps(namespace), namespace: namespace, name: name}, nil
}

// String returns "<namespace>/<name>".
func (c *ConfigMap) String() string { return c.namespace + "/" + c.name }

// Get implements Store.
func (c *ConfigMap) Get(ctx context.Context) (Object, error) {
	cm, err := c.client.Get(ctx, c.name, metav1.GetOptions{})
	if err != nil {
		return Object{}, c.mapErr("get", err)
	}
	c.remember(cm)
	return fromConfigMap(cm), nil
}

// Create implements Store.
func (c *ConfigMap) Create(ctx context.Context, o Object) (Object, error) {
	cm := c.toConfigMap(o)
	cm.ResourceVersion = ""
	out, err := c.client.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return Object{}, c.mapErr("create", err)
	}
	c.remember(out)
	return fromConfigMap(out), nil
}

// Update implements Store.
func (c *ConfigMap) Update(ctx context.Context, o Object) (Object, error) {
	if o.ResourceVersion == "" {
		return Object{}, fmt.Errorf("%w: configmap %s", ErrNoResourceVersion, c)
	}
	base, err := c.base(ctx, o.ResourceVersion)
	if err != nil {
		return Object{}, err
	}
	// o's maps are the store's now (see Sharing): they are sent as they are.
	base.Labels, base.Annotations, base.Data = o.Labels, o.Annotations, o.Data
	out, err := c.client.Update(ctx, base, metav1.UpdateOptions{})
	if err != nil {
		return Object{}, c.mapErr("update", err)
	}
	c.remember(out)
	return fromConfigMap(out), nil
}

// base returns a copy of the ConfigMap at resourceVersion rv, to update: the
// one remembered, or a fresh read. A read at another version is a conflict,
// as the API server would report.
func (c *ConfigMap) base(ctx context.Context, rv string) (*corev1.ConfigMap, error) {
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if last != nil && last.ResourceVersion == rv {
		return copyForUpdate(last), nil
	}
	cm, err := c.client.Get(ctx, c.name, metav1.GetOptions{})
	if err != nil {
		return nil, c.mapErr("update", err)
	}
	c.remember(cm)
	if cm.ResourceVersion != rv {
		return nil, fmt.Errorf("%w: update configmap %s: resourceVersion %s is not the current %s", ErrConflict, c, rv, cm.ResourceVersion)
	}
	return copyForUpdate(cm), nil
}

// copyForUpdate copies cm, read-only, for Update to fill in: all but the
// labels, annotations and data, which Update replaces with the object's.
func copyForUpdate(cm *corev1.ConfigMap) *corev1.ConfigMap {
	cp := *cm
	cp.Labels, cp.Annotations, cp.Data = nil, nil, nil
	return cp.DeepCopy()
}

// remember keeps cm, an object the API server sent back, as the base of
// the next Update. It is read-only, as the maps fromConfigMap hands out of
// it are (see Sharing), so it is kept uncopied.
func (c *ConfigMap) remember(cm *corev1.ConfigMap) {
	c.mu.Lock()
	c.last = cm
	c.mu.Unlock()
}

// toConfigMap wraps o, whose maps the store was given, uncopied.
func (c *ConfigMap) toConfigMap(o Object) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            c.name,
			Namespace:       c.namespace,
			Labels:          o.Labels,
			Annotations:     o.Annotations,
			ResourceVersion: o.ResourceVersion,
		},
		Data: o.Data,
	}
}

// fromConfigMap returns the object cm holds, sharing its maps: cm is one
// the API server sent, which nobody else holds (remember keeps a deep
// copy).
func fromConfigMap(cm *corev1.ConfigMap) Object {
	return Object{
		Name:            cm.Name,
		Labels:          cm.Labels,
		Annotations:     cm.Annotations,
		Data:            cm.Data,
		ResourceVersion: cm.ResourceVersion,
	}
}

// mapErr turns API errors into the store's sentinels, keeping the original.
func (c *ConfigMap) mapErr(op string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %s configmap %s: %w", ErrNotFound, op, c, err)
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%w: %s configmap %s: %w", ErrConflict, op, c, err)
	default:
		return fmt.Errorf("store: %s configmap %s: %w", op, c, err)
	}
}
