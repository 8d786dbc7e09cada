// Command schemagen writes the JSON schemas kubeconform validates the chart
// against, offline, in kubeconform's layout:
//
//	<out>/v<version>-standalone-strict/<kind>-<group>-<version>.json
//
// Kubernetes kinds come from the OpenAPI v2 document of a Kubernetes
// release (api/openapi-spec/swagger.json of the k8s.io/kubernetes module);
// custom resources from their CustomResourceDefinitions, as JSON. Each
// schema is made standalone (every $ref inlined) and strict (objects with
// listed properties take no others, as the API server prunes or rejects
// them); int-or-string and quantity fields take both forms, as the API
// server does. Descriptions are dropped to keep the files small.
//
//	go run ./deploy/helm/testdata/schemagen -swagger swagger.json -crd servicemonitors.json \
//	    -crd certificates.json -crd issuers.json -version 1.36.3 -out deploy/helm/testdata/schemas
//
// See ../README.md for where the inputs came from.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// kinds are the Kubernetes kinds the chart renders.
var kinds = []gvk{
	{"apps", "v1", "StatefulSet"},
	{"", "v1", "Service"},
	{"", "v1", "Secret"},
	{"", "v1", "ConfigMap"},
	{"", "v1", "ServiceAccount"},
	{"policy", "v1", "PodDisruptionBudget"},
}

type gvk struct{ group, version, kind string }

// fileName is kubeconform's name for a kind's schema: the kind, the first
// label of its group, and its version, in lower case.
func (g gvk) fileName() string {
	name := strings.ToLower(g.kind)
	if g.group != "" {
		name += "-" + strings.ToLower(strings.Split(g.group, ".")[0])
	}
	return name + "-" + strings.ToLower(g.version) + ".json"
}

type crdFlags []string

func (c *crdFlags) String() string     { return strings.Join(*c, ",") }
func (c *crdFlags) Set(v string) error { *c = append(*c, v); return nil }

func main() {
	swagger := flag.String("swagger", "", "Kubernetes OpenAPI v2 document (swagger.json)")
	version := flag.String("version", "", "Kubernetes version the document is of, e.g. 1.36.3")
	out := flag.String("out", "", "schema directory (kubeconform -schema-location)")
	var crds crdFlags
	flag.Var(&crds, "crd", "CustomResourceDefinition as JSON (repeatable)")
	flag.Parse()
	if *swagger == "" || *version == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "schemagen: -swagger, -version and -out are required")
		os.Exit(2)
	}
	dir := filepath.Join(*out, "v"+strings.TrimPrefix(*version, "v")+"-standalone-strict")
	if err := run(*swagger, crds, dir); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

func run(swaggerFile string, crds []string, dir string) error {
	var doc struct {
		Definitions map[string]any `json:"definitions"`
	}
	if err := readJSON(swaggerFile, &doc); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, k := range kinds {
		name, def, err := findKind(doc.Definitions, k)
		if err != nil {
			return err
		}
		schema, err := standalone(def, doc.Definitions, []string{name})
		if err != nil {
			return fmt.Errorf("%s: %w", k.kind, err)
		}
		if err := write(filepath.Join(dir, k.fileName()), schema); err != nil {
			return err
		}
	}
	for _, f := range crds {
		if err := writeCRD(f, dir); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// findKind returns the definition tagged with the group, version and kind.
func findKind(defs map[string]any, k gvk) (string, any, error) {
	for name, def := range defs {
		tags, _ := def.(map[string]any)["x-kubernetes-group-version-kind"].([]any)
		for _, tag := range tags {
			m, _ := tag.(map[string]any)
			if m["group"] == k.group && m["version"] == k.version && m["kind"] == k.kind {
				return name, def, nil
			}
		}
	}
	return "", nil, fmt.Errorf("no definition of %s %s/%s", k.kind, k.group, k.version)
}

// Definitions whose values take a string or a number.
const (
	intOrString = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
	quantity    = "io.k8s.apimachinery.pkg.api.resource.Quantity"
)

// standalone returns v with every $ref to a definition inlined, strict
// and without descriptions. seen holds the definitions being inlined, to
// refuse a cycle.
func standalone(v any, defs map[string]any, seen []string) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var err error
			if out[i], err = standalone(e, defs, seen); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/definitions/")
			switch name {
			case intOrString:
				return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}, nil
			case quantity:
				return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}, nil
			}
			for _, s := range seen {
				if s == name {
					return nil, fmt.Errorf("definition %s refers to itself", name)
				}
			}
			def, ok := defs[name]
			if !ok {
				return nil, fmt.Errorf("no definition %s", name)
			}
			return standalone(def, defs, append(seen, name))
		}
		out := map[string]any{}
		for k, e := range x {
			if k == "description" || strings.HasPrefix(k, "x-kubernetes-") {
				continue
			}
			if k == "properties" {
				props := map[string]any{}
				for pk, pv := range e.(map[string]any) {
					var err error
					if props[pk], err = standalone(pv, defs, seen); err != nil {
						return nil, err
					}
				}
				out[k] = props
				continue
			}
			var err error
			if out[k], err = standalone(e, defs, seen); err != nil {
				return nil, err
			}
		}
		strict(out, x)
		return out, nil
	}
	return v, nil
}

// strict closes an object schema that lists its properties, unless the
// source says it keeps unknown fields.
func strict(out, src map[string]any) {
	if _, ok := out["properties"]; !ok {
		return
	}
	if _, ok := out["additionalProperties"]; ok {
		return
	}
	if src["x-kubernetes-preserve-unknown-fields"] == true {
		return
	}
	out["additionalProperties"] = false
}

// writeCRD writes the schema of every served version of a
// CustomResourceDefinition.
func writeCRD(path, dir string) error {
	var crd struct {
		Kind string `json:"kind"`
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := readJSON(path, &crd); err != nil {
		return err
	}
	if crd.Kind != "CustomResourceDefinition" {
		return errors.New("not a CustomResourceDefinition")
	}
	wrote := 0
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		schema := crdSchema(v.Schema.OpenAPIV3Schema)
		k := gvk{crd.Spec.Group, v.Name, crd.Spec.Names.Kind}
		if err := write(filepath.Join(dir, k.fileName()), schema); err != nil {
			return err
		}
		wrote++
	}
	if wrote == 0 {
		return errors.New("no served version with a schema")
	}
	return nil
}

// crdSchema makes a CRD's structural schema strict, turns
// x-kubernetes-int-or-string into a choice of both, and drops
// descriptions.
func crdSchema(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = crdSchema(e)
		}
		return out
	case map[string]any:
		if x["x-kubernetes-int-or-string"] == true {
			return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
		}
		out := map[string]any{}
		for k, e := range x {
			if k == "description" || strings.HasPrefix(k, "x-kubernetes-") {
				continue
			}
			if k == "properties" {
				props := map[string]any{}
				for pk, pv := range e.(map[string]any) {
					props[pk] = crdSchema(pv)
				}
				out[k] = props
				continue
			}
			out[k] = crdSchema(e)
		}
		strict(out, x)
		return out
	}
	return v
}

func write(path string, schema any) error {
	b, err := json.MarshalIndent(schema, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
