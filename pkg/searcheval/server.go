package searcheval

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/pkg/replay"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// APIServer is a Mnemos reached through its API: turns go to /v1/turns as
// `mnemos replay` sends them (retried on 429 and 5xx), sessions are read
// back with GET /v1/sessions/{id}, and questions go to the scope's search.
type APIServer struct {
	url, key string
	hc       *http.Client
	mn       *client.Client
}

// NewAPIServer is the Mnemos at baseURL, the tenant of apiKey.
func NewAPIServer(baseURL, apiKey string) *APIServer {
	hc := &http.Client{Timeout: 60 * time.Second}
	return &APIServer{url: strings.TrimRight(baseURL, "/"), key: apiKey, hc: hc,
		mn: client.New(baseURL, apiKey, client.WithHTTPClient(hc))}
}

// Send posts the events in order.
func (s *APIServer) Send(ctx context.Context, events []turn.Event) error {
	_, err := replay.Send(ctx, events, replay.SendOptions{URL: s.url, APIKey: s.key, Client: s.hc})
	return err
}

// AppliedSeq reads the session's applied seq; a session the server does
// not have yet has 0.
func (s *APIServer) AppliedSeq(ctx context.Context, session string) (int64, error) {
	st, err := s.mn.GetSession(ctx, session)
	if client.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return st.AppliedSeq, nil
}

// Search asks GET /v1/scopes/{scope}/search for the best limit hits. A
// message hit without a position names no turn (-1).
func (s *APIServer) Search(ctx context.Context, scope, query string, limit int) ([]Hit, error) {
	res, err := s.mn.SearchScope(ctx, scope, query, client.SearchOptions{Limit: limit})
	if err != nil {
		return nil, err
	}
	hits := make([]Hit, len(res.Hits))
	for i, h := range res.Hits {
		hits[i] = Hit{Source: h.Source, Session: h.Session, Position: -1, Memory: h.Memory}
		if h.Position != nil {
			hits[i].Position = *h.Position
		}
	}
	return hits, nil
}
