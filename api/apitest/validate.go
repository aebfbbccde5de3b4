package apitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"

	"github.com/mnemos-ai/mnemos/api"
)

// Validator checks HTTP answers against an OpenAPI document.
type Validator struct {
	v    validator.Validator
	ops  []Operation
	name string // the document's file, for messages
}

// NewValidator builds a Validator on doc (JSON or YAML). Formats
// (date-time) are asserted.
func NewValidator(doc []byte) (*Validator, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("apitest: parse the OpenAPI document: %w", err)
	}
	v, errs := validator.NewValidator(d, config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("apitest: build the validator: %w", errors.Join(errs...))
	}
	json, err := toJSON(doc)
	if err != nil {
		return nil, err
	}
	ops, err := operationsOf(json)
	if err != nil {
		return nil, err
	}
	return &Validator{v: v, ops: ops, name: "the document"}, nil
}

func toJSON(doc []byte) ([]byte, error) {
	if json.Valid(doc) {
		return doc, nil
	}
	return api.YAMLToJSON(doc)
}

// Document checks the document itself against the OpenAPI specification.
func (v *Validator) Document() error {
	ok, errs := v.v.ValidateDocument()
	if ok {
		return nil
	}
	return joinValidation(errs)
}

// documented is the validator on the embedded document, built once, from
// the YAML so that its errors name lines of api/openapi.yaml.
var documented = sync.OnceValues(func() (*Validator, error) { return named(api.OpenAPIYAML(), "api/openapi.yaml") })

// Default is the Validator on the document this build serves.
func Default() (*Validator, error) { return documented() }

var adminDocumented = sync.OnceValues(func() (*Validator, error) {
	return named(api.AdminOpenAPIYAML(), "api/admin-openapi.yaml")
})

// Admin is the Validator on the operator API's document.
func Admin() (*Validator, error) { return adminDocumented() }

func named(doc []byte, name string) (*Validator, error) {
	v, err := NewValidator(doc)
	if err != nil {
		return nil, err
	}
	v.name = name
	return v, nil
}

// Check validates one answer: its status, headers and body must be ones
// the document allows for the request's operation. A method and path the
// document does not list must answer 404 or 405 with an Error body (the
// fallback route). body is the answer's whole body; resp.Body is not read.
func (v *Validator) Check(req *http.Request, resp *http.Response, body []byte) error {
	if req.Method == http.MethodHead {
		return nil // no body to check
	}
	if !v.documents(req.Method, req.URL.EscapedPath()) {
		return checkFallback(resp, body)
	}
	cp := *resp
	cp.Body = io.NopCloser(bytes.NewReader(body))
	if ok, errs := v.v.ValidateHttpResponse(req, &cp); !ok {
		return joinValidation(errs)
	}
	return nil
}

// documents reports whether the document has an operation for method on
// the (escaped) path.
func (v *Validator) documents(method, path string) bool {
	for _, op := range v.ops {
		if op.Method == method && matchTemplate(op.Path, path) {
			return true
		}
	}
	return false
}

// matchTemplate matches a path against an OpenAPI path template: segment
// by segment, a {parameter} matching any non-empty segment.
func matchTemplate(template, path string) bool {
	ts, ps := strings.Split(template, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if ps[i] == "" {
				return false
			}
			continue
		}
		if t != ps[i] {
			return false
		}
	}
	return true
}

// checkFallback checks the answer to a method and path the document does
// not list: 404 or 405, and an Error body.
func checkFallback(resp *http.Response, body []byte) error {
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		return fmt.Errorf("the document has no such operation, and the answer is %d, not 404 or 405", resp.StatusCode)
	}
	return checkErrorBody(resp, body)
}

// checkErrorBody checks an Error body: {"error": {"code", "message"}} and
// nothing else, as application/json.
func checkErrorBody(resp *http.Response, body []byte) error {
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return fmt.Errorf("an error answer of Content-Type %q, not application/json", resp.Header.Get("Content-Type"))
	}
	var e struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return fmt.Errorf("not an Error body: %w", err)
	}
	if e.Error == nil || e.Error.Code == "" || e.Error.Message == "" {
		return errors.New(`not an Error body: want {"error": {"code": "...", "message": "..."}}`)
	}
	return nil
}

// joinValidation makes one error of the validator's.
func joinValidation[E error](errs []E) error {
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// Transport returns an http.RoundTripper that sends through base (the
// default transport when nil) and fails t on any answer the document does
// not allow (see Validator.Check). The answer's body is read whole and
// handed on unread.
func Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	return transportOn(t, base, Default)
}

// Client is an http.Client whose answers are validated (see Transport).
func Client(t testing.TB) *http.Client {
	return &http.Client{Transport: Transport(t, nil)}
}

// AdminClient is an http.Client whose answers are validated against the
// operator API's document.
func AdminClient(t testing.TB) *http.Client {
	return &http.Client{Transport: transportOn(t, nil, Admin)}
}

func transportOn(t testing.TB, base http.RoundTripper, doc func() (*Validator, error)) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	v, err := doc()
	if err != nil {
		t.Fatalf("apitest: %v", err)
	}
	return &transport{t: t, base: base, v: v}
}

type transport struct {
	t    testing.TB
	base http.RoundTripper
	v    *Validator
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := tr.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close() // read whole; a close error says nothing more
	if err != nil {
		return nil, fmt.Errorf("apitest: read the answer to %s %s: %w", req.Method, req.URL.Path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := tr.v.Check(req, resp, body); err != nil {
		const most = 2000
		shown := body
		if len(shown) > most {
			shown = shown[:most]
		}
		tr.t.Errorf("%s %s answered %d, which %s does not allow:\n%v\nbody: %s", req.Method, req.URL.Path, resp.StatusCode, tr.v.name, err, shown)
	}
	return resp, nil
}
