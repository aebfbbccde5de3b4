package httpapi

import (
	"fmt"
	"net/http"
	"strings"
)

// Mux is what routes are registered on: an *http.ServeMux, or a wrapper
// that records each pattern (the route walk in api/apitest compares them
// with the OpenAPI document, so a route missing from either fails a test).
type Mux interface {
	Handle(pattern string, handler http.Handler)
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
	// Handler finds the route of a request, as http.ServeMux's does: the
	// catch-all asks it which methods a path takes.
	Handler(r *http.Request) (h http.Handler, pattern string)
}

// CatchAll is the pattern that answers every /v1 request no route takes.
const CatchAll = "/v1/"

// RegisterCatchAll answers, in Mnemos's dialect, every /v1 request that no
// route of mux takes: 405 with Allow when another method of its path has a
// route, else 404.
func RegisterCatchAll(mux Mux) { RegisterCatchAllAt(mux, CatchAll) }

// RegisterCatchAllAt is RegisterCatchAll for the subtree prefix (ending in
// "/"): the operator API's /admin/v1/.
func RegisterCatchAllAt(mux Mux, prefix string) {
	mux.HandleFunc(prefix, func(w http.ResponseWriter, r *http.Request) {
		if allow := allowedMethods(mux, r, prefix); len(allow) > 0 {
			list := strings.Join(allow, ", ")
			w.Header().Set("Allow", list)
			Mnemos.WriteError(w, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: fmt.Sprintf("%s %s: this path takes %s", r.Method, r.URL.Path, list)})
			return
		}
		Mnemos.WriteError(w, &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
	})
}

// probedMethods are the methods a path is probed with for an Allow header.
var probedMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowedMethods lists the methods some route of mux other than the
// catch-all at prefix takes for r's path: the catch-all matches every
// method, so the mux never answers 405 itself. nil when no route has the
// path.
func allowedMethods(mux Mux, r *http.Request, prefix string) []string {
	var out []string
	for _, m := range probedMethods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != prefix {
			out = append(out, m)
		}
	}
	return out
}
