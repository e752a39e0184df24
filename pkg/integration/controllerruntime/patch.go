package controllerruntime

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const mergePatch = types.MergePatchType

// isApply reports whether t is a server-side apply patch.
func isApply(t types.PatchType) bool {
	return t == types.ApplyYAMLPatchType || t == types.ApplyCBORPatchType
}

// stampedPatch is a patch with the writer's stamps (none: a subresource's patch) and,
// when version is set, the resourceVersion precondition added to its body.
type stampedPatch struct {
	inner          client.Patch
	stamps         stamps
	version        string // "": no precondition
	hadAnnotations bool   // the version patched has metadata.annotations (JSON patches)
}

func (p *stampedPatch) Type() types.PatchType { return p.inner.Type() }

// Data returns the inner patch's body with the stamps and the version added: into
// metadata of a merge, strategic merge or apply body (an object), as operations in
// front of a JSON patch (a list). Other bodies are refused.
func (p *stampedPatch) Data(obj client.Object) ([]byte, error) {
	data, err := p.inner.Data(obj)
	if err != nil {
		return nil, err
	}
	switch t := p.Type(); t {
	case types.JSONPatchType:
		return p.jsonPatch(data)
	case types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType:
		return p.objectPatch(data)
	default:
		return nil, fmt.Errorf("%w: patch type %q", ErrUnstampablePatch, t)
	}
}

// objectPatch adds the stamps to metadata.annotations and the version to
// metadata.resourceVersion of a patch that is a JSON object.
func (p *stampedPatch) objectPatch(data []byte) ([]byte, error) {
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil || body == nil {
		return nil, fmt.Errorf("%w: the body is not a JSON object (%v)", ErrUnstampablePatch, err)
	}
	meta, _ := body["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		body["metadata"] = meta
	}
	if len(p.stamps) > 0 {
		annotations, _ := meta["annotations"].(map[string]any)
		if annotations == nil {
			annotations = map[string]any{}
			meta["annotations"] = annotations
		}
		for k, v := range p.stamps {
			annotations[k] = v
		}
	}
	if p.version != "" {
		meta["resourceVersion"] = p.version
	}
	return json.Marshal(body)
}

// jsonPatch puts operations that set the version and the stamps in front of a JSON
// patch's own. A later operation of the caller's that replaces metadata.annotations as
// a whole drops the stamps (the API server's fence then refuses the write).
func (p *stampedPatch) jsonPatch(data []byte) ([]byte, error) {
	var ops []json.RawMessage
	if err := json.Unmarshal(data, &ops); err != nil {
		return nil, fmt.Errorf("%w: the body is not a JSON patch (%v)", ErrUnstampablePatch, err)
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	var front []op
	if p.version != "" {
		front = append(front, op{"add", "/metadata/resourceVersion", p.version})
	}
	switch {
	case len(p.stamps) == 0:
	case p.hadAnnotations:
		for k, v := range p.stamps {
			front = append(front, op{"add", "/metadata/annotations/" + escapePointer(k), v})
		}
	default:
		front = append(front, op{"add", "/metadata/annotations", map[string]string(p.stamps)})
	}
	all := make([]any, 0, len(front)+len(ops))
	for _, o := range front {
		all = append(all, o)
	}
	for _, o := range ops {
		all = append(all, o)
	}
	return json.Marshal(all)
}

// escapePointer escapes a JSON pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// stampApplyConfiguration returns obj as an unstructured object with the stamps among
// its annotations.
func stampApplyConfiguration(obj runtime.ApplyConfiguration, s stamps) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("controllerruntime: encoding the apply configuration: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("controllerruntime: decoding the apply configuration: %w", err)
	}
	s.stamp(u)
	return u, nil
}
