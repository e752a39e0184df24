package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/baton-dev/baton/pkg/controller/app"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		c          app.ClusterConfig
		kubeconfig string
		metrics    string
		logs       logFlags
	)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&c.Identity, "identity", os.Getenv("POD_NAME"), "lease holder identity, unique per replica (default $POD_NAME)")
	fs.StringVar(&c.Namespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), "default"), "namespace of the configuration ConfigMap, the pods and the published ConfigMap ($POD_NAMESPACE when set)")
	fs.StringVar(&c.LeaseNamespace, "lease-namespace", "", "namespace of the Lease (default: --namespace)")
	fs.StringVar(&c.LeaseName, "lease-name", app.DefaultLeaseName, "name of the Lease")
	fs.StringVar(&c.ConfigMap, "config-configmap", app.DefaultConfigName, "ConfigMap holding the controller's configuration")
	fs.StringVar(&c.ConfigKey, "config-key", "config.yaml", "key of the configuration in that ConfigMap")
	fs.StringVar(&c.PodSelector, "pod-selector", "app=haproxy", "label selector of the target pods")
	fs.StringVar(&c.PublishedConfigMap, "published-configmap", app.DefaultPublishedName, "ConfigMap the leader publishes to")
	fs.StringVar(&metrics, "metrics-addr", ":8080", "address serving /metrics, /healthz and /readyz; off when empty")
	fs.DurationVar(&c.LeaseDuration, "lease-duration", k8sle.DefaultLeaseDuration, "lease duration")
	fs.DurationVar(&c.RenewDeadline, "renew-deadline", k8sle.DefaultRenewDeadline, "renew deadline (below the lease duration)")
	fs.DurationVar(&c.RetryPeriod, "retry-period", k8sle.DefaultRetryPeriod, "retry period (renew deadline above 1.2 × this)")
	logs.register(fs, "info")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: baton run [flags]\n\nRuns one replica of the controller against a Kubernetes cluster. SIGTERM or SIGINT\nstops it gracefully: leader work stops, then the lease is released.\n\n")
		fs.PrintDefaults()
	}
	if code, done := parse(fs, args); done {
		return code
	}
	logger, err := logs.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "baton run: %v\n", err)
		return exitUsage
	}
	slog.SetDefault(logger)

	cfg, err := restConfig(kubeconfig)
	if err != nil {
		logger.Error("no API server configuration", "error", err)
		return exitUsage
	}
	c.Clientset, err = kubernetes.NewForConfig(rest.AddUserAgent(cfg, "baton/"+c.Identity))
	if err != nil {
		logger.Error("building the client", "error", err)
		return exitUsage
	}
	c.ReleaseOnCancel = true
	opts, err := app.Cluster(c)
	if err != nil {
		logger.Error("invalid configuration", "error", err)
		return exitUsage
	}
	opts.Logger = logger
	r, err := app.New(opts)
	if err != nil {
		logger.Error("invalid configuration", "error", err)
		return exitUsage
	}

	if metrics != "" {
		ln, err := net.Listen("tcp", metrics)
		if err != nil {
			r.Close()
			logger.Error("listening for metrics", "addr", metrics, "error", err)
			return exitUsage
		}
		srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 5 * time.Second}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics server failed", "error", err)
			}
		}()
		defer func() {
			shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
			<-done
		}()
		logger.Info("serving metrics", "addr", ln.Addr().String())
	}

	logger.Info("baton run starting", "identity", c.Identity, "namespace", c.Namespace,
		"lease", cmp.Or(c.LeaseNamespace, c.Namespace)+"/"+c.LeaseName, "config", c.ConfigMap,
		"pods", c.PodSelector, "published", c.PublishedConfigMap)
	if err := r.Run(ctx); err != nil {
		logger.Error("controller stopped with an error", "error", err)
		return exitFailed
	}
	logger.Info("baton run stopped")
	return exitOK
}

// restConfig reads the kubeconfig file, or the in-cluster configuration
// when path is empty.
func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("not in a cluster and no --kubeconfig: %w", err)
	}
	return cfg, nil
}
