package proxy

import (
	"io"
	"net/http"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// The OpenAI door: the routes of OpenAI's APIs the proxy serves, answered
// in OpenAI's dialect and sent to the tenant's OpenAI upstream (its own,
// or Config.UpstreamOpenAI) with the key Mnemos holds for it.

// listModels relays GET /v1/models: the upstream's answer, its status and
// the headers a client reads, as they came.
func (h *Handler) listModels(w http.ResponseWriter, r *http.Request, tenant string) {
	up, err := h.upstreamOf(r.Context(), tenant, store.ProviderOpenAI)
	if err != nil {
		httpapi.Internal(w, httpapi.OpenAI, h.Log, "reading the tenant's OpenAI upstream", err)
		return
	}
	if up.URL == "" {
		httpapi.OpenAI.WriteError(w, &httpapi.Error{Status: http.StatusServiceUnavailable, Code: "no_upstream",
			Message: "this Mnemos has no OpenAI upstream: set MNEMOS_UPSTREAM_OPENAI_URL, or the tenant's (mnemos tenant upstream -provider openai)"})
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, strings.TrimSuffix(up.URL, "/")+"/v1/models", nil)
	if err != nil {
		httpapi.Internal(w, httpapi.OpenAI, h.Log, "building the upstream request", err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+up.Key)
	resp, err := h.cfg.UpstreamClient.Do(req) //nolint:gosec // the URL is the operator's configured upstream, not the client's
	if err != nil {
		if r.Context().Err() == nil {
			httpapi.OpenAI.WriteError(w, &httpapi.Error{Status: http.StatusBadGateway, Code: "upstream_unreachable", Message: "the upstream did not answer: " + err.Error()})
		}
		return
	}
	defer resp.Body.Close()
	for name, values := range resp.Header {
		if l := strings.ToLower(name); l == "content-type" || l == "retry-after" || l == "x-request-id" || strings.HasPrefix(l, "openai-") {
			w.Header()[name] = values
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body) // the client went away; nothing left to tell it
}
