package api_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// schema is the pointer of a schema of components/schemas.
func schema(name string) []string { return []string{"#/components/schemas/" + name} }

// answer is the pointer of the JSON schema of an operation's answer.
func answer(path, method, status string) string {
	return "#/paths/" + strings.ReplaceAll(path, "/", "~1") + "/" + method + "/responses/" + status + "/content/application~1json/schema"
}

// bodies are the Go types of the document's bodies. A type reached from
// one of them (a field's) is checked where it is reached; a schema of
// components/schemas with properties is either here or in untyped.
var bodies = append([]apitest.Body{
	{Schemas: schema("Error"), Type: reflect.TypeFor[api.ErrorBody]()},
	{Schemas: schema("AnthropicError"), Type: reflect.TypeFor[api.AnthropicErrorBody]()},
	{Schemas: schema("OpenAIError"), Type: reflect.TypeFor[api.OpenAIErrorBody]()},
	{Schemas: []string{answer("/healthz", "get", "200"), answer("/readyz", "get", "200"), answer("/readyz", "get", "503")}, Type: reflect.TypeFor[api.Health]()},
	{Schemas: schema("InputMessage"), Type: reflect.TypeFor[turn.Message]()},
	{Schemas: schema("Block"), Type: reflect.TypeFor[turn.Block]()},
	{Schemas: schema("RequestPrefix"), Type: reflect.TypeFor[turn.RequestPrefix]()},
	{Schemas: schema("ClientCompaction"), Type: reflect.TypeFor[turn.ClientCompaction]()},
	{Schemas: schema("TurnAccepted"), Type: reflect.TypeFor[api.TurnAccepted]()},
	{Schemas: schema("Tokens"), Type: reflect.TypeFor[api.Tokens]()},
	{Schemas: schema("SeqRange"), Type: reflect.TypeFor[api.SeqRange]()},
	{Schemas: schema("Session"), Type: reflect.TypeFor[api.Session]()},
	{Schemas: schema("AgentThread"), Type: reflect.TypeFor[api.AgentThread]()},
	{Schemas: schema("SessionList"), Type: reflect.TypeFor[api.SessionList]()},
	{Schemas: schema("SessionPatch"), Type: reflect.TypeFor[api.SessionPatch]()},
	{Schemas: schema("PinsRequest"), Type: reflect.TypeFor[api.PinsRequest]()},
	{Schemas: schema("Pins"), Type: reflect.TypeFor[api.Pins]()},
	{Schemas: schema("PreflightRequest"), Type: reflect.TypeFor[api.PreflightRequest]()},
	{Schemas: schema("Preflight"), Type: reflect.TypeFor[api.Preflight]()},
	{Schemas: schema("ToolResult"), Type: reflect.TypeFor[api.ToolResult]()},
	{Schemas: schema("UsageRow"), Type: reflect.TypeFor[api.UsageRow]()},
	{Schemas: schema("TenantUsage"), Type: reflect.TypeFor[api.TenantUsage]()},
	{Schemas: schema("ProxyUsage"), Type: reflect.TypeFor[api.ProxyUsage]()},
	{Schemas: schema("ProxyAmounts"), Type: reflect.TypeFor[api.ProxyAmounts]()},
	{Schemas: schema("SessionUsage"), Type: reflect.TypeFor[api.SessionUsage]()},
	{Schemas: schema("ThreadUsage"), Type: reflect.TypeFor[api.ThreadUsage]()},
	{Schemas: schema("ScopeList"), Type: reflect.TypeFor[api.ScopeList]()},
	{Schemas: schema("Context"), Type: reflect.TypeFor[api.Context]()},
	{Schemas: schema("Message"), Type: reflect.TypeFor[api.Message]()},
	{Schemas: schema("ContextRequest"), Type: reflect.TypeFor[api.ContextRequest]()},
	{Schemas: schema("CompactionRef"), Type: reflect.TypeFor[api.CompactionRef]()},
	{Schemas: schema("CompactRequest"), Type: reflect.TypeFor[api.CompactRequest]()},
	{Schemas: schema("Usage"), Type: reflect.TypeFor[api.Usage]()},
	{Schemas: schema("Compaction"), Type: reflect.TypeFor[api.Compaction]()},
	{Schemas: schema("CompactionList"), Type: reflect.TypeFor[api.CompactionList]()},
	{Schemas: schema("Notes"), Type: reflect.TypeFor[api.Notes]()},
	{Schemas: schema("RecallRequest"), Type: reflect.TypeFor[api.RecallRequest]()},
	{Schemas: schema("Recall"), Type: reflect.TypeFor[api.Recall]()},
	{Schemas: schema("RecalledMemory"), Type: reflect.TypeFor[api.RecalledMemory]()},
	{Schemas: schema("Memory"), Type: reflect.TypeFor[api.Memory]()},
	{Schemas: schema("MemoryList"), Type: reflect.TypeFor[api.MemoryList]()},
	{Schemas: schema("Revision"), Type: reflect.TypeFor[api.Revision]()},
	{Schemas: schema("RevisionList"), Type: reflect.TypeFor[api.RevisionList]()},
	{Schemas: schema("Diff"), Type: reflect.TypeFor[api.Diff]()},
	{Schemas: schema("Index"), Type: reflect.TypeFor[api.Index]()},
	{Schemas: schema("ScopeImport"), Type: reflect.TypeFor[api.ScopeImport]()},
	{Schemas: schema("SessionImport"), Type: reflect.TypeFor[api.SessionImport]()},
	{Schemas: schema("Dream"), Type: reflect.TypeFor[api.Dream]()},
	{Schemas: schema("Proposal"), Type: reflect.TypeFor[api.Proposal]()},
	{Schemas: schema("DreamList"), Type: reflect.TypeFor[api.DreamList]()},
	{Schemas: schema("SearchResult"), Type: reflect.TypeFor[api.SearchResult]()},
	{Schemas: schema("SearchHit"), Type: reflect.TypeFor[api.SearchHit]()},
}, sharedBodies...)

// adminBodies are the Go types of the operator API's document
// (admin-openapi.yaml): its own bodies, and the tenants' API's types it
// answers with too.
var adminBodies = append([]apitest.Body{
	{Schemas: schema("Error"), Type: reflect.TypeFor[api.ErrorBody]()},
	{Schemas: schema("Tenant"), Type: reflect.TypeFor[api.Tenant]()},
	{Schemas: schema("TenantList"), Type: reflect.TypeFor[api.TenantList]()},
	{Schemas: schema("TenantRequest"), Type: reflect.TypeFor[api.TenantRequest]()},
	{Schemas: schema("TenantCreated"), Type: reflect.TypeFor[api.TenantCreated]()},
	{Schemas: schema("TenantSettings"), Type: reflect.TypeFor[api.TenantSettings]()},
	{Schemas: schema("Upstream"), Type: reflect.TypeFor[api.Upstream]()},
	{Schemas: schema("UpstreamRequest"), Type: reflect.TypeFor[api.UpstreamRequest]()},
}, sharedBodies...)

// sharedBodies are the schemas both documents hold: a tenant's keys, its
// audit log and an erasure, which the operator API serves as /v1 does.
var sharedBodies = []apitest.Body{
	{Schemas: schema("APIKey"), Type: reflect.TypeFor[api.Key]()},
	{Schemas: schema("APIKeyList"), Type: reflect.TypeFor[api.KeyList]()},
	{Schemas: schema("APIKeyRequest"), Type: reflect.TypeFor[api.KeyRequest]()},
	{Schemas: schema("RotateRequest"), Type: reflect.TypeFor[api.RotateRequest]()},
	{Schemas: schema("APIKeySecret"), Type: reflect.TypeFor[api.KeySecret]()},
	{Schemas: schema("AuditRecord"), Type: reflect.TypeFor[api.AuditRecord]()},
	{Schemas: schema("AuditLog"), Type: reflect.TypeFor[api.AuditLog]()},
	{Schemas: schema("Erasure"), Type: reflect.TypeFor[api.Erasure]()},
	{Schemas: schema("ErasedTable"), Type: reflect.TypeFor[api.ErasedTable]()},
}

// documents are the two documents and the Go types of their bodies.
var documents = []struct {
	file   string
	json   func() ([]byte, error)
	bodies []apitest.Body
}{
	{"api/openapi.yaml", api.OpenAPIJSON, bodies},
	{"api/admin-openapi.yaml", api.AdminOpenAPIJSON, adminBodies},
}

// untyped are the schemas of components/schemas no Go type stands for,
// and why.
var untyped = map[string]string{
	"AnthropicBody": "the Messages API's body, which the model proxy passes on as it is",
	"OpenAIBody":    "an OpenAI API's body, which the model proxy passes on as it is",
	"MemoryScopes":  "a map[string]string in Go, checked in the bodies that hold it",
	"TurnEvent": "the outline of pkg/turn's schema (mnemos.turn.v1.schema.json), which is the contract the gateway applies " +
		"and pkg/turn's tests hold turn.Event to; its messages, prefix and compaction are checked here",
}

// notInTheDocument are the exported structs of package api that no body
// of the document describes, and why.
var notInTheDocument = map[string]string{
	"ToolResultInput": "an MCP tool's input: the MCP server derives its schema from the type",
	"SearchInput":     "an MCP tool's input: the MCP server derives its schema from the type",
	"RecallInput":     "an MCP tool's input: the MCP server derives its schema from the type",
}

// TestTheTypesAreTheDocuments: every body's Go type says what its schema
// says, field by field (names, required or omitempty, basic types), so
// api/openapi.yaml and the code that serves and reads it cannot drift
// apart. Fix whichever side is wrong; a new schema wants its type in
// bodies.
func TestTheTypesAreTheDocuments(t *testing.T) {
	t.Parallel()
	for _, d := range documents {
		doc, err := d.json()
		require.NoError(t, err)
		problems, _, err := apitest.CheckBodies(doc, d.bodies)
		require.NoError(t, err)
		require.Empty(t, problems, "%s and the Go types of its bodies disagree:\n%s", d.file, strings.Join(problems, "\n"))
	}
}

// TestEverySchemaHasItsType: each object schema of components/schemas,
// and each inline schema of a JSON body, has a Go type in bodies (or a
// reason in untyped), and each exported struct of package api is the
// type of a body, or of a field of one (or has a reason in
// notInTheDocument): neither side can add a body the other does not have.
func TestEverySchemaHasItsType(t *testing.T) {
	t.Parallel()
	reached := map[string]bool{}
	for _, d := range documents {
		raw, err := d.json()
		require.NoError(t, err)
		require.Empty(t, untypedSchemas(t, raw, d.bodies), "schemas of %s without a Go type: add each to its bodies (api/types_test.go)", d.file)
		_, checked, err := apitest.CheckBodies(raw, d.bodies)
		require.NoError(t, err)
		for typ := range checked {
			if typ.PkgPath() == reflect.TypeFor[api.Session]().PkgPath() {
				reached[typ.Name()] = true
			}
		}
	}
	var unreached []string
	for _, name := range exportedStructs(t) {
		if !reached[name] && notInTheDocument[name] == "" {
			unreached = append(unreached, name)
		}
	}
	require.Empty(t, unreached, "exported structs of package api no body of api/openapi.yaml or api/admin-openapi.yaml describes: describe them, or say why not in notInTheDocument")
}

// untypedSchemas are the object schemas of raw's components/schemas and
// the inline schemas of its JSON answers that no body types (nor untyped
// explains).
func untypedSchemas(t *testing.T, raw []byte, bodies []apitest.Body) []string {
	t.Helper()
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	typed := map[string]bool{}
	for _, b := range bodies {
		for _, p := range b.Schemas {
			typed[p] = true
		}
	}
	var missing []string
	for name, s := range doc.Components.Schemas {
		_, props := s["properties"]
		if props && !typed[schema(name)[0]] && untyped[name] == "" {
			missing = append(missing, "components/schemas/"+name)
		}
	}
	for path, item := range doc.Paths {
		for method, raw := range item {
			var op struct {
				Responses map[string]struct {
					Content map[string]struct {
						Schema map[string]any `json:"schema"`
					} `json:"content"`
				} `json:"responses"`
			}
			if json.Unmarshal(raw, &op) != nil {
				continue // summary, description, parameters
			}
			for status, r := range op.Responses {
				s := r.Content["application/json"].Schema
				if _, props := s["properties"]; props && !typed[answer(path, method, status)] {
					missing = append(missing, method+" "+path+" "+status)
				}
			}
		}
	}
	slices.Sort(missing)
	return missing
}

// exportedStructs are the names of the exported struct types declared in
// package api's files.
func exportedStructs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var out []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				if _, isStruct := ts.Type.(*ast.StructType); isStruct && ts.Name.IsExported() {
					out = append(out, ts.Name.Name)
				}
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}
