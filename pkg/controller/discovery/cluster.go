// The informer-driven source: the pods of a namespace matching a label
// selector, read through a client-go informer.

package discovery

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/baton-dev/baton/pkg/controller/config"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// NewCluster returns a Discovery of the pods matching labelSelector (label
// selector syntax, for example "app=haproxy"; it must not be empty) in
// namespace.
func NewCluster(bus *busevents.EventBus, clientset kubernetes.Interface, namespace, labelSelector string, opts Options) (*Discovery, error) {
	if clientset == nil {
		return nil, errors.New("discovery: clientset is nil")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("discovery: namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if strings.TrimSpace(labelSelector) == "" {
		return nil, errors.New("discovery: label selector is empty; it would select every pod in the namespace")
	}
	sel, err := labels.Parse(labelSelector)
	if err != nil {
		return nil, fmt.Errorf("discovery: label selector %q: %w", labelSelector, err)
	}
	d, err := newDiscovery(bus, opts)
	if err != nil {
		return nil, err
	}
	d.clientset, d.namespace, d.selector = clientset, namespace, sel
	return d, nil
}

func (d *Discovery) informer() (cache.SharedIndexInformer, error) {
	pods := d.clientset.CoreV1().Pods(d.namespace)
	selector := d.selector.String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return pods.Watch(ctx, o)
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.notify() },
		UpdateFunc: func(any, any) { d.notify() },
		DeleteFunc: func(any) { d.notify() },
	}); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	return informer, nil
}

// fromStore converts the informer's pods.
func fromStore(s cache.Store) []config.Pod {
	objs := s.List()
	out := make([]config.Pod, 0, len(objs))
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, config.Pod{
			Namespace: p.Namespace,
			Name:      p.Name,
			IP:        p.Status.PodIP,
			Ready:     podReady(p),
		})
	}
	return out
}

// podReady is the Ready condition, false for a terminating pod or one
// without an IP.
func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
