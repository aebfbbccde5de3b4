// Package apitest holds the tests' side of the API contract (package api):
// a mux that records the routes registered on it, the comparison of those
// routes with the OpenAPI document, an http.RoundTripper that validates
// every answer against the document, and the validation of bus events
// against their JSON Schemas.
package apitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/mnemos-ai/mnemos/api"
)

// Recorder is an http.ServeMux that records every pattern registered on
// it, so a test can compare them with the document (http.ServeMux cannot
// list its routes).
type Recorder struct {
	*http.ServeMux

	mu       sync.Mutex
	patterns []string
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{ServeMux: http.NewServeMux()} }

// Handle records pattern and registers handler for it.
func (r *Recorder) Handle(pattern string, handler http.Handler) {
	r.record(pattern)
	r.ServeMux.Handle(pattern, handler)
}

// HandleFunc records pattern and registers handler for it.
func (r *Recorder) HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request)) {
	r.record(pattern)
	r.ServeMux.HandleFunc(pattern, handler)
}

func (r *Recorder) record(pattern string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.patterns = append(r.patterns, pattern)
}

// Patterns are the patterns registered, in order.
func (r *Recorder) Patterns() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.patterns)
}

// Operation is a method and a path template of the document
// ("GET /v1/sessions/{id}").
type Operation struct {
	Method string
	Path   string
}

func (o Operation) String() string { return o.Method + " " + o.Path }

// AnyMethod is the method of a path the document describes without
// operations: a protocol of its own served there (the MCP endpoint), whose
// routes may take any method.
const AnyMethod = "*"

// methods are the operations a path item of OpenAPI 3.1 can hold.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// Operations lists the operations of the document, sorted.
func Operations() ([]Operation, error) {
	raw, err := api.OpenAPIJSON()
	if err != nil {
		return nil, err
	}
	return operationsOf(raw)
}

// AdminOperations lists the operations of the operator API's document
// (api/admin-openapi.yaml), sorted.
func AdminOperations() ([]Operation, error) {
	raw, err := api.AdminOpenAPIJSON()
	if err != nil {
		return nil, err
	}
	return operationsOf(raw)
}

func operationsOf(raw []byte) ([]Operation, error) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("apitest: the document's paths: %w", err)
	}
	var ops []Operation
	for path, item := range doc.Paths {
		n := len(ops)
		for _, m := range methods {
			if _, ok := item[m]; ok {
				ops = append(ops, Operation{Method: strings.ToUpper(m), Path: path})
			}
		}
		if _, described := item["description"]; described && len(ops) == n {
			ops = append(ops, Operation{Method: AnyMethod, Path: path})
		}
	}
	slices.SortFunc(ops, func(a, b Operation) int { return strings.Compare(a.String(), b.String()) })
	return ops, nil
}

// CheckRoutes compares the patterns registered on a mux with the
// document's operations and returns what disagrees: a route the document
// does not describe, an operation no route serves, or a pattern the
// document cannot say. A pattern without a method is accepted only for a
// subtree ("/v1/"): the fallback that answers the methods and paths the
// document does not list (404 or 405 with an Error body, which Transport
// checks).
func CheckRoutes(patterns []string) ([]string, error) {
	ops, err := Operations()
	if err != nil {
		return nil, err
	}
	return compareRoutes(patterns, ops, "api/openapi.yaml"), nil
}

// CheckAdminRoutes is CheckRoutes for the operator API's routes and its
// document, api/admin-openapi.yaml.
func CheckAdminRoutes(patterns []string) ([]string, error) {
	ops, err := AdminOperations()
	if err != nil {
		return nil, err
	}
	return compareRoutes(patterns, ops, "api/admin-openapi.yaml"), nil
}

// compareRoutes compares patterns with ops, the operations of the
// document file.
func compareRoutes(patterns []string, ops []Operation, file string) []string {
	var problems []string
	registered := map[Operation]bool{}
	for _, p := range patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			if !strings.HasSuffix(p, "/") {
				problems = append(problems, fmt.Sprintf("%q has no method: only a fallback subtree (ending in /) may", p))
			}
			continue
		}
		path = strings.TrimSpace(path)
		if !strings.HasPrefix(path, "/") {
			problems = append(problems, fmt.Sprintf("%q names a host: the document cannot say it", p))
			continue
		}
		// ServeMux's {name...} matches the rest of the path; OpenAPI has no
		// such template, so the route cannot be described.
		if strings.Contains(path, "...}") || strings.HasSuffix(path, "/") && path != "/" {
			problems = append(problems, fmt.Sprintf("%q matches a subtree: the document cannot describe it", p))
			continue
		}
		path = strings.TrimSuffix(path, "{$}")
		op := Operation{Method: method, Path: path}
		if registered[op] {
			problems = append(problems, fmt.Sprintf("%s is registered twice", op))
		}
		registered[op] = true
	}
	servedPaths := map[string]bool{}
	for op := range registered {
		servedPaths[op.Path] = true
	}
	documented := map[Operation]bool{}
	for _, op := range ops {
		documented[op] = true
		if op.Method == AnyMethod {
			if !servedPaths[op.Path] {
				problems = append(problems, fmt.Sprintf("the document describes %s, which no route serves", op.Path))
			}
			continue
		}
		if !registered[op] {
			problems = append(problems, fmt.Sprintf("the document describes %s, which no route serves", op))
		}
	}
	for op := range registered {
		if !documented[op] && !documented[Operation{Method: AnyMethod, Path: op.Path}] {
			problems = append(problems, fmt.Sprintf("%s is registered but not in %s", op, file))
		}
	}
	slices.Sort(problems)
	return problems
}
