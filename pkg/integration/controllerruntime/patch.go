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

func isApply(t types.PatchType) bool {
	return t == types.ApplyYAMLPatchType || t == types.ApplyCBORPatchType
}

// stampedPatch is a patch with the writer's stamps (none: a subresource's patch) and,
// when version is set, the resourceVersion precondition added to its body.
type stampedPatch struct {
	inner   client.Patch
	stamps  stamps
	version string // "": no precondition
	// hadAnnotations, hadLabels: the version patched has metadata.annotations,
	// metadata.labels (for JSON patches).
	hadAnnotations, hadLabels bool
}

// had records which of the maps the stamps go in base, the version patched, has.
func (p *stampedPatch) had(base client.Object) {
	p.hadAnnotations, p.hadLabels = base.GetAnnotations() != nil, base.GetLabels() != nil
}

func (p *stampedPatch) Type() types.PatchType { return p.inner.Type() }

// Data returns the inner patch's body with the stamps and the version added: into
// metadata of a merge, strategic merge or apply body (an object), as operations after
// a JSON patch's own (a list). Other bodies are refused.
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
	annotations, labels := p.stamps.split()
	setMembers(meta, "annotations", annotations)
	setMembers(meta, "labels", labels)
	if p.version != "" {
		meta["resourceVersion"] = p.version
	}
	return json.Marshal(body)
}

// setMembers sets each of kv in the map meta[key], which it creates if kv is not
// empty.
func setMembers(meta map[string]any, key string, kv map[string]string) {
	if len(kv) == 0 {
		return
	}
	m, _ := meta[key].(map[string]any)
	if m == nil {
		m = map[string]any{}
		meta[key] = m
	}
	for k, v := range kv {
		m[k] = v
	}
}

// jsonOp is an operation of a JSON patch (RFC 6902), as far as stamping reads it.
type jsonOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// addOp is an "add" operation the stamping appends to a JSON patch.
type addOp struct {
	Op    string `json:"op"` // "add"
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// jsonPatch appends operations that set the stamps and the version after a JSON
// patch's own, so that they hold in the result whatever the caller's operations do:
// one that replaces or removes metadata.annotations (or metadata.labels) as a whole no
// longer drops the stamps, and none can change the version the patch is checked
// against. The stamps go in member by member where the map exists after the caller's
// operations (told from the version patched and the operations), and as a new map
// where it does not. A caller's move or copy onto the map (or metadata) is refused:
// what it leaves there cannot be told from the patch.
func (p *stampedPatch) jsonPatch(data []byte) ([]byte, error) {
	var ops []json.RawMessage
	if err := json.Unmarshal(data, &ops); err != nil {
		return nil, fmt.Errorf("%w: the body is not a JSON patch (%v)", ErrUnstampablePatch, err)
	}
	parsed := make([]jsonOp, len(ops))
	for i, raw := range ops {
		if err := json.Unmarshal(raw, &parsed[i]); err != nil {
			return nil, fmt.Errorf("%w: operation %d of the JSON patch (%v)", ErrUnstampablePatch, i, err)
		}
	}
	all := make([]any, 0, len(ops)+len(p.stamps)+1)
	for _, o := range ops {
		all = append(all, o)
	}
	annotations, labels := p.stamps.split()
	for _, m := range []struct {
		path string
		had  bool
		kv   map[string]string
	}{{"/metadata/annotations", p.hadAnnotations, annotations}, {"/metadata/labels", p.hadLabels, labels}} {
		if len(m.kv) == 0 {
			continue
		}
		stampOps, err := mapOps(parsed, m.path, m.had, m.kv)
		if err != nil {
			return nil, err
		}
		all = append(all, stampOps...)
	}
	if p.version != "" {
		all = append(all, addOp{"add", "/metadata/resourceVersion", p.version})
	}
	return json.Marshal(all)
}

// mapOps returns the operations that set each of kv in the JSON object at path after
// ops, given whether that object exists before them (had).
func mapOps(ops []jsonOp, path string, had bool, kv map[string]string) ([]any, error) {
	exists, err := objectAfter(ops, path, had)
	if err != nil {
		return nil, err
	}
	if !exists {
		return []any{addOp{"add", path, kv}}, nil
	}
	out := make([]any, 0, len(kv))
	for k, v := range kv {
		out = append(out, addOp{"add", path + "/" + escapePointer(k), v})
	}
	return out, nil
}

// objectAfter reports whether a JSON object is at path (a pointer of plain tokens, such
// as "/metadata/annotations") after ops, given whether one was there before them (had).
// An operation on path or an ancestor decides it: remove (or a move away) leaves none,
// add and replace leave what their value holds there; a move or copy onto them is
// refused (ErrUnstampablePatch).
func objectAfter(ops []jsonOp, path string, had bool) (bool, error) {
	exists := had
	for i, o := range ops {
		if o.Op == "move" && covers(o.From, path) {
			exists = false
		}
		if o.Op == "test" || !covers(o.Path, path) {
			continue
		}
		switch o.Op {
		case "remove":
			exists = false
		case "add", "replace":
			exists = holdsObject(o.Value, strings.TrimPrefix(path, o.Path))
		default:
			return false, fmt.Errorf("%w: operation %d of the JSON patch (%s onto %q) leaves %s unknown", ErrUnstampablePatch, i, o.Op, o.Path, path)
		}
	}
	return exists, nil
}

// covers reports whether the JSON pointer p is path or one of its ancestors.
func covers(p, path string) bool {
	return p == path || strings.HasPrefix(path, p+"/")
}

// holdsObject reports whether value holds a JSON object at rest, a pointer into it of
// plain tokens ("" for value itself).
func holdsObject(value json.RawMessage, rest string) bool {
	var v any
	if json.Unmarshal(value, &v) != nil {
		return false
	}
	for _, tok := range strings.Split(rest, "/")[1:] {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		v = m[tok]
	}
	_, ok := v.(map[string]any)
	return ok
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
