package pipeline_test

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/pipeline"
)

func ExamplePipeline_Execute() {
	cfg := &config.Config{
		Frontends: []config.Frontend{{Name: "web", Bind: ":8080", DefaultBackend: "app"}},
		Backends:  []config.Backend{{Name: "app", Port: 80, Balance: "leastconn"}},
	}
	pods := []config.Pod{
		{Namespace: "shop", Name: "app-1", IP: "10.0.0.2", Ready: true},
		{Namespace: "shop", Name: "app-0", IP: "10.0.0.1", Ready: true},
		{Namespace: "shop", Name: "app-2", IP: "10.0.0.3", Ready: false},
	}
	res, err := pipeline.NewDefault().Execute(context.Background(), pipeline.Input{
		Config: cfg, ConfigVersion: "v7", Pods: pods, PodGeneration: 3,
	})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("valid=%v config=%s pods=%d\n", res.Valid(), res.ConfigVersion, res.PodGeneration)
	fmt.Print(res.Output)

	// A frontend routing to a backend that does not exist is caught, with its line.
	cfg.Frontends[0].DefaultBackend = "missing"
	res, _ = pipeline.NewDefault().Execute(context.Background(), pipeline.Input{Config: cfg, Pods: pods})
	for _, e := range res.Errors {
		fmt.Println(e)
	}
	// Output:
	// valid=true config=v7 pods=3
	// # Rendered by baton. Do not edit: the leader rewrites it.
	// global
	//     maxconn 4096
	//     log stdout format raw local0
	//
	// defaults
	//     mode http
	//     log global
	//     timeout connect 5s
	//     timeout client 30s
	//     timeout server 30s
	//
	// frontend web
	//     bind :8080
	//     default_backend app
	//
	// backend app
	//     balance leastconn
	//     server shop.app-0 10.0.0.1:80 check
	//     server shop.app-1 10.0.0.2:80 check
	// line 15: default_backend "missing": no such backend
}
