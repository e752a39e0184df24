// Package deathsignal tests the elector's death signal (pkg/k8s/incarnation with
// leaderelection.Config.DeathWatch) against a real kube-apiserver and etcd; the
// tests play the kubelet by writing pod status.
package deathsignal
