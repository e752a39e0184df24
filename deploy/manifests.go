// Package deploy holds Baton's Kubernetes manifests (kubectl apply -k
// deploy/) and decodes them, for the tests that check them and the
// integration test that applies their RBAC to a real API server.
//
// # Manifests
//
//	namespace.yaml      the baton namespace
//	rbac.yaml           ServiceAccount, least-privilege Role and RoleBinding
//	networkpolicy.yaml  no ingress to baton's pods (the kubelet's probes pass)
//	configmap.yaml      a sample configuration (baton-config)
//	deployment.yaml     two replicas of `baton run`
//	admission-fence.yaml  the API server's fence of the controller's writes
//	                    (controllerruntime.NewAdmissionFence)
//
// README.md says who controls leadership (whoever may update the Lease)
// and how the RBAC keeps other workloads off it.
//
// # Concurrency properties
//
// Objects decodes a fresh copy on each call and is safe for concurrent use.
package deploy

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

//go:embed *.yaml
var files embed.FS

// Manifests are the files kustomization.yaml lists, in its order.
var Manifests = []string{"namespace.yaml", "rbac.yaml", "networkpolicy.yaml", "configmap.yaml", "deployment.yaml", "admission-fence.yaml"}

// Object is one decoded manifest document.
type Object struct {
	File   string
	Object runtime.Object
}

// Objects decodes every document of Manifests with client-go's scheme. It
// fails on a document that does not decode into a known type.
func Objects() ([]Object, error) {
	var out []Object
	decode := scheme.Codecs.UniversalDeserializer()
	for _, name := range Manifests {
		raw, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, fmt.Errorf("deploy: %w", err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("deploy: %s: document %d: %w", name, i, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, _, err := decode.Decode(doc, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("deploy: %s: document %d: %w", name, i, err)
			}
			out = append(out, Object{File: name, Object: obj})
		}
	}
	return out, nil
}

// File returns the raw content of one of the embedded files.
func File(name string) ([]byte, error) {
	if !slices.Contains(append(slices.Clone(Manifests), "kustomization.yaml"), name) {
		return nil, fmt.Errorf("deploy: no manifest %q", name)
	}
	return fs.ReadFile(files, name)
}

// stripComments drops the comment lines of a YAML document.
func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '#' {
			continue
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
