package llmtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Server is a fake model API on a local port. It answers each call as its
// script says and records every call it receives, refused ones included.
type Server struct {
	// URL is the base URL to configure the provider with.
	URL string

	script Script
	srv    *httptest.Server
	stop   chan struct{}

	mu   sync.Mutex
	reqs []Request
}

// wire is one API's format: how to decode a call, and how to write an
// answer or a failure.
type wire interface {
	// decode reads a call's body; an error is answered as a bad request.
	decode(body []byte) (Request, error)
	answer(w http.ResponseWriter, req Request, reply Reply, body []byte)
	fail(w http.ResponseWriter, reply Reply)
	failRequest(w http.ResponseWriter, msg string)
}

func newServer(t testing.TB, script Script, w wire, paths []string, suffix string) *Server {
	t.Helper()
	s := &Server{script: script, stop: make(chan struct{})}
	mux := http.NewServeMux()
	for _, p := range paths {
		mux.HandleFunc("POST "+p, func(rw http.ResponseWriter, r *http.Request) { s.serve(rw, r, w) })
	}
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + suffix
	t.Cleanup(func() {
		close(s.stop) // release hung calls first: Close waits for them
		s.srv.Close()
	})
	return s
}

func (s *Server) serve(rw http.ResponseWriter, r *http.Request, w wire) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.failRequest(rw, "could not read the body: "+err.Error())
		return
	}
	req, err := w.decode(body)
	req.Path, req.Header, req.Body = r.URL.Path, r.Header.Clone(), json.RawMessage(body)
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	if err != nil {
		w.failRequest(rw, err.Error())
		return
	}
	reply := s.script(req)
	switch {
	case reply.Hang:
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
	case reply.Raw != nil:
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusOK)
		_, _ = rw.Write(reply.Raw) // the client went away; nothing to do
	case reply.Fail != "":
		if reply.RetryAfter > 0 {
			rw.Header().Set("Retry-After-Ms", formatMillis(reply.RetryAfter))
		}
		w.fail(rw, reply)
	default:
		w.answer(rw, req, reply, body)
	}
}

// Requests returns the calls received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// Calls is how many calls the server received.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func writeJSON(rw http.ResponseWriter, status int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(v) // the client went away; nothing to do
}

func formatMillis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
