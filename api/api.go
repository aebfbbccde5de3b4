// Package api holds Mnemos's contracts: the OpenAPI 3.1 document of the
// HTTP API (openapi.yaml, served as JSON at GET /openapi.json), the Go
// types of its request and answer bodies, and the JSON Schemas of the
// events Mnemos publishes on the bus (events/*.schema.json). The turn
// event's schema lives with its decoder, in pkg/turn.
//
// The operator API has a document of its own, admin-openapi.yaml, held to
// its routes and client the same way.
//
// The document is the published contract; the types are the one Go
// rendering of it, which the gateway answers with and the Go client
// (package client) reads, so neither keeps a copy of its own.
//
// The tests hold the code to them: the types' fields are compared with
// the document's schemas (types_test.go), api/apitest walks the gateway's
// routes against the document and validates every answer the API tests
// receive, and every event the system tests publish, against these files.
package api

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

//go:embed openapi.yaml
var openapiYAML []byte

//go:embed admin-openapi.yaml
var adminYAML []byte

//go:embed events/*.schema.json
var eventFiles embed.FS

// OpenAPIYAML is the OpenAPI document as written.
func OpenAPIYAML() []byte { return bytes.Clone(openapiYAML) }

// openapiJSON is the document as JSON, keys in the order they are written.
var openapiJSON = sync.OnceValues(func() ([]byte, error) { return YAMLToJSON(openapiYAML) })

// OpenAPIJSON is the OpenAPI document as JSON, as GET /openapi.json serves it.
func OpenAPIJSON() ([]byte, error) {
	b, err := openapiJSON()
	return bytes.Clone(b), err
}

// AdminOpenAPIYAML is the operator API's document (/admin/v1 on the admin
// listener) as written: a document of its own, as its routes, keys and
// clients are the operator's, not a tenant's.
func AdminOpenAPIYAML() []byte { return bytes.Clone(adminYAML) }

var adminJSON = sync.OnceValues(func() ([]byte, error) { return YAMLToJSON(adminYAML) })

// AdminOpenAPIJSON is the operator API's document as JSON.
func AdminOpenAPIJSON() ([]byte, error) {
	b, err := adminJSON()
	return bytes.Clone(b), err
}

// Handler serves the OpenAPI document as JSON. The document is embedded,
// so it is the one this build serves; a test fails when it does not convert.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		doc, err := openapiJSON()
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = fmt.Fprintf(w, `{"error":{"code":"internal","message":%q}}`+"\n", "the OpenAPI document does not convert: "+err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(doc) // the client went away; nothing left to tell it
	})
}

// EventSchemas returns the JSON Schema of every event Mnemos publishes,
// by file name ("mnemos.turn_accounted.v1.schema.json"), shared
// definitions included.
func EventSchemas() map[string][]byte {
	out := map[string][]byte{}
	entries, err := fs.ReadDir(eventFiles, "events")
	if err != nil {
		panic(err) // embedded at build time: cannot fail
	}
	for _, e := range entries {
		b, err := eventFiles.ReadFile(path.Join("events", e.Name()))
		if err != nil {
			panic(err)
		}
		out[e.Name()] = b
	}
	return out
}

// EventSchemaFile is the file name of the schema of events with the given
// schema name ("mnemos.dream.v1" → "mnemos.dream.v1.schema.json").
func EventSchemaFile(schema string) string { return schema + ".schema.json" }

// YAMLToJSON converts a YAML document to JSON, keeping the order of keys.
// Only what JSON can say is accepted: string keys, no anchors or aliases.
func YAMLToJSON(doc []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("api: parse YAML: %w", err)
	}
	var buf bytes.Buffer
	if err := writeNode(&buf, &root); err != nil {
		return nil, fmt.Errorf("api: YAML to JSON: %w", err)
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

func writeNode(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("line %d: want one document", n.Line)
		}
		return writeNode(buf, n.Content[0])
	case yaml.MappingNode:
		buf.WriteByte('{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a key must be a scalar", k.Line)
			}
			if seen[k.Value] {
				return fmt.Errorf("line %d: key %q repeated", k.Line, k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k.Value)
			buf.WriteByte(':')
			if err := writeNode(buf, v); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeNode(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		return writeScalar(buf, n)
	default:
		return fmt.Errorf("line %d: anchors and aliases are not supported", n.Line)
	}
}

func writeScalar(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!str", "!!timestamp", "!!binary":
		writeString(buf, n.Value)
	case "!!null":
		buf.WriteString("null")
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.WriteString(strconv.FormatBool(b))
	case "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b, err := json.Marshal(v) // NaN and infinities are refused here
		if err != nil {
			return fmt.Errorf("line %d: %q is no JSON number", n.Line, n.Value)
		}
		buf.Write(b)
	default:
		return fmt.Errorf("line %d: tag %s is not supported", n.Line, n.ShortTag())
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.WriteString(strings.TrimSuffix(b.String(), "\n"))
}
