package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// The schemas manifests are checked against come from Go modules, fetched
// through the module proxy (the one network CI has) into the module cache:
// Kubernetes's own OpenAPI definitions, and the CRDs of the Prometheus
// Operator (ServiceMonitor) and KEDA (ScaledObject) from their repositories.
const (
	kubernetesModule         = "k8s.io/kubernetes@v1.36.3"
	prometheusOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
	kedaModule               = "github.com/kedacore/keda/v2@v2.21.0"
)

// moduleDirs caches `go mod download` answers for the test process.
var moduleDirs sync.Map // module@version → func() (string, error)

// moduleDir downloads a module (or finds it in the module cache) and
// returns its directory. It runs outside any module, so the download checks
// the module against the checksum database like any other.
func moduleDir(t testing.TB, module string) string {
	t.Helper()
	once, _ := moduleDirs.LoadOrStore(module, sync.OnceValues(func() (string, error) {
		cmd := exec.Command("go", "mod", "download", "-json", module)
		cmd.Dir = os.TempDir()
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=on")
		out, err := cmd.Output()
		var info struct{ Dir, Error string }
		if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
			err = jerr
		}
		switch {
		case info.Error != "":
			return "", errors.New(info.Error)
		case err != nil:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, ee.Stderr)
			}
			return "", err
		}
		return info.Dir, nil
	}))
	dir, err := once.(func() (string, error))()
	if err != nil {
		t.Fatalf("go mod download %s (the schemas come through the Go module proxy): %v", module, err)
	}
	return dir
}

// kubeValidator checks manifests against the schemas of their kinds,
// strictly: a field the schema does not name is an error, as it is for
// `kubectl apply --validate=strict`.
type kubeValidator struct {
	schemas map[string]*jsonschema.Schema // "group/version/Kind" → schema
}

var sharedValidator = sync.OnceValues(buildValidator)

// newKubeValidator returns the validator of the test process.
func newKubeValidator(t testing.TB) *kubeValidator {
	t.Helper()
	for _, m := range []string{kubernetesModule, prometheusOperatorModule, kedaModule} {
		moduleDir(t, m) // a clear failure when the proxy cannot be reached
	}
	v, err := sharedValidator()
	if err != nil {
		t.Fatalf("building the Kubernetes schemas: %v", err)
	}
	return v
}

const objectMetaRef = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

func buildValidator() (*kubeValidator, error) {
	find := func(module string) (string, error) {
		v, ok := moduleDirs.Load(module)
		if !ok {
			return "", fmt.Errorf("%s was not downloaded", module)
		}
		return v.(func() (string, error))()
	}
	k8s, err := find(kubernetesModule)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(k8s, "api", "openapi-spec", "swagger.json"))
	if err != nil {
		return nil, err
	}
	var spec struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("swagger.json: %w", err)
	}
	defs := map[string]any{}
	kinds := map[string]string{} // gvk → definition
	for name, def := range spec.Definitions {
		switch name {
		case "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
			defs[name] = intOrString()
			continue
		case "io.k8s.apimachinery.pkg.api.resource.Quantity":
			defs[name] = map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
			continue
		}
		if gvks, ok := def["x-kubernetes-group-version-kind"].([]any); ok {
			for _, g := range gvks {
				m := g.(map[string]any)
				kinds[gvkKey(m["group"].(string), m["version"].(string), m["kind"].(string))] = name
			}
		}
		defs[name] = strict(def)
	}

	// CRDs: each served version's openAPIV3Schema, made strict the same
	// way, with the standard ObjectMeta.
	crds := []struct{ module, file string }{
		{prometheusOperatorModule, "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"},
		{kedaModule, "config/crd/bases/keda.sh_scaledobjects.yaml"},
	}
	for _, c := range crds {
		dir, err := find(c.module)
		if err != nil {
			return nil, err
		}
		raw, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			return nil, err
		}
		var crd struct {
			Spec struct {
				Group string `yaml:"group"`
				Names struct {
					Kind string `yaml:"kind"`
				} `yaml:"names"`
				Versions []struct {
					Name   string `yaml:"name"`
					Schema struct {
						OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
					} `yaml:"schema"`
				} `yaml:"versions"`
			} `yaml:"spec"`
		}
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", c.file, err)
		}
		for _, v := range crd.Spec.Versions {
			schema := strict(v.Schema.OpenAPIV3Schema).(map[string]any)
			schema["properties"].(map[string]any)["metadata"] = map[string]any{"$ref": objectMetaRef}
			name := "crd." + crd.Spec.Group + "." + v.Name + "." + crd.Spec.Names.Kind
			defs[name] = schema
			kinds[gvkKey(crd.Spec.Group, v.Name, crd.Spec.Names.Kind)] = name
		}
	}

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource("kubernetes.json", map[string]any{"definitions": defs}); err != nil {
		return nil, err
	}
	v := &kubeValidator{schemas: map[string]*jsonschema.Schema{}}
	for gvk, name := range kinds {
		s, err := c.Compile("kubernetes.json#/definitions/" + name)
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", name, err)
		}
		v.schemas[gvk] = s
	}
	return v, nil
}

func gvkKey(group, version, kind string) string { return group + "/" + version + "/" + kind }

func intOrString() map[string]any {
	return map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
}

// strict returns a copy of an OpenAPI schema for a JSON Schema validator:
// objects with declared properties refuse others (unless the schema keeps
// unknown fields), and int-or-string fields take either.
func strict(node any) any {
	s, ok := node.(map[string]any)
	if !ok {
		return node
	}
	if s["format"] == "int-or-string" || s["x-kubernetes-int-or-string"] == true {
		return intOrString()
	}
	out := make(map[string]any, len(s)+1)
	for k, v := range s {
		switch k {
		case "properties":
			props := map[string]any{}
			for name, p := range v.(map[string]any) {
				props[name] = strict(p)
			}
			out[k] = props
		case "items", "additionalProperties", "not":
			out[k] = strict(v)
		case "allOf", "anyOf", "oneOf":
			var list []any
			for _, item := range v.([]any) {
				list = append(list, strict(item))
			}
			out[k] = list
		default:
			out[k] = v
		}
	}
	_, hasProps := out["properties"]
	_, hasAdditional := out["additionalProperties"]
	if hasProps && !hasAdditional && out["x-kubernetes-preserve-unknown-fields"] != true {
		out["additionalProperties"] = false
	}
	return out
}

// validate checks one manifest, decoded from YAML.
func (v *kubeValidator) validate(doc map[string]any) error {
	apiVersion, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		group, version = "", apiVersion
	}
	s, ok := v.schemas[gvkKey(group, version, kind)]
	if !ok {
		return fmt.Errorf("no schema for apiVersion %q kind %q", apiVersion, kind)
	}
	// Through JSON, so numbers and maps are what the validator expects.
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("%s %v: %w", kind, doc["metadata"].(map[string]any)["name"], err)
	}
	return nil
}

// splitManifests decodes a stream of YAML documents, skipping empty ones.
func splitManifests(t testing.TB, stream []byte) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(stream))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		if len(doc) > 0 {
			docs = append(docs, doc)
		}
	}
}
