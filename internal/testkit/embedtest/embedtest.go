// Package embedtest is a scripted OpenAI-compatible embeddings API for
// tests and tools that run the real SDK client offline. It serves
// POST /v1/embeddings in the API's wire format and answers with
// deterministic vectors: a text's terms (lowercase words without stop
// words, cut to a rough stem: Terms), each mapped
// through Config.Concepts and counted in the one of a fixed number of
// dimensions its hash names, the counts normalized. Texts that share terms
// or concepts are close; texts that share none are orthogonal but for
// terms that hash to one dimension. The same text always gets the same
// vector.
//
// A test starts one with Start and points the client at its URL:
//
//	srv := embedtest.Start(t, embedtest.Config{Concepts: map[string]string{"automobil": "car"}})
//	e, _ := embed.NewOpenAI(embed.Config{BaseURL: srv.URL + "/v1"})
package embedtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"

	"github.com/mnemos-ai/mnemos/pkg/embed"
)

// DefaultDimensions is the length of the vectors unless configured or asked for.
const DefaultDimensions = 256

// Config is how a Server answers.
type Config struct {
	// Dimensions is the length of the vectors (DefaultDimensions); a
	// request's "dimensions" overrides it.
	Dimensions int
	// Concepts maps a term (as Terms makes it: "automobil" for
	// "automobile") to the concept it is counted as, so that synonyms
	// land on one dimension: {"automobil": "car"}.
	Concepts map[string]string
	// Fail, when set, answers a request instead of the vectors when it
	// returns an error status: for retries and refusals.
	Fail func(inputs []string) (status int, message string)
}

// Server is the scripted API, an http.Handler.
type Server struct {
	// URL is the base URL, set by Start; clients use URL + "/v1".
	URL string

	cfg Config

	mu    sync.Mutex
	calls []Call
}

// Call is the record of one request.
type Call struct {
	Model  string
	Inputs []string
	Status int
}

// New is a server answering as cfg says.
func New(cfg Config) *Server {
	if cfg.Dimensions <= 0 {
		cfg.Dimensions = DefaultDimensions
	}
	return &Server{cfg: cfg}
}

// TB is what Start needs of a test.
type TB interface {
	Helper()
	Cleanup(func())
}

// Start serves a new server on a local port until the test ends.
func Start(t TB, cfg Config) *Server {
	t.Helper()
	s := New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Calls returns the requests received so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Inputs is every text embedded so far, in the order received.
func (s *Server) Inputs() []string {
	var out []string
	for _, c := range s.Calls() {
		if c.Status == http.StatusOK {
			out = append(out, c.Inputs...)
		}
	}
	return out
}

// request is the body of POST /v1/embeddings.
type request struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     int             `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		apiError(w, http.StatusNotFound, "invalid_request_error", "Not found: "+r.URL.Path)
		return
	}
	var req request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20))
	if err := dec.Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	inputs, err := readInputs(req.Input)
	if err == nil && req.Model == "" {
		err = errors.New("you must provide a model parameter")
	}
	if err != nil {
		s.record(Call{Model: req.Model, Inputs: inputs, Status: http.StatusBadRequest})
		apiError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if s.cfg.Fail != nil {
		if status, msg := s.cfg.Fail(inputs); status != 0 {
			s.record(Call{Model: req.Model, Inputs: inputs, Status: status})
			apiError(w, status, "server_error", msg)
			return
		}
	}
	s.record(Call{Model: req.Model, Inputs: inputs, Status: http.StatusOK})
	dims := s.cfg.Dimensions
	if req.Dimensions > 0 {
		dims = req.Dimensions
	}
	data := make([]map[string]any, len(inputs))
	tokens := 0
	for i, text := range inputs {
		v := s.Vector(text, dims)
		tokens += max(len(text)/4, 1)
		var enc any = v
		if req.EncodingFormat == "base64" {
			enc = base64.StdEncoding.EncodeToString(embed.Encode(v))
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": enc}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": data, "model": req.Model,
		"usage": map[string]any{"prompt_tokens": tokens, "total_tokens": tokens},
	})
}

// readInputs reads "input": a string or an array of strings; token arrays
// are refused (Mnemos sends text). Empty strings are refused, as the API
// refuses them.
func readInputs(raw json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		raw, _ = json.Marshal([]string{one}) // a string always encodes
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 {
		return nil, errors.New("'input' must be a string or a non-empty array of strings")
	}
	for i, s := range many {
		if s == "" {
			return many, fmt.Errorf("'$.input[%d]' is invalid: an empty string", i)
		}
	}
	return many, nil
}

func (s *Server) record(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

// Vector is the vector the server answers for text: its terms, each
// mapped through Concepts, counted in the dimension its hash names, and
// normalized. Counts have no sign, so no two terms cancel; a text without
// terms (only stop words) is hashed whole. No vector is zero.
func (s *Server) Vector(text string, dims int) []float32 {
	v := make([]float32, dims)
	terms := Terms(text)
	if len(terms) == 0 {
		terms = []string{text}
	}
	for _, t := range terms {
		if c, ok := s.cfg.Concepts[t]; ok {
			t = c
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(t)) // a hash never fails to write
		v[h.Sum64()%uint64(dims)]++
	}
	return embed.Normalize(v)
}

func apiError(w http.ResponseWriter, status int, typ, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": nil}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the client went away; nothing to do
}
