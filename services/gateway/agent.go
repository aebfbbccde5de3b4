package gateway

import (
	"fmt"
	"net/http"
)

// The headers an agent's client sends on the routes made for agents (the
// Messages API proxy, /mcp): which session and memory scope a request is
// about, and the API key the way Anthropic clients send it.
const (
	// HeaderUser and HeaderProject name the memory scopes user:<id> and
	// project:<id>.
	HeaderUser    = "X-Mnemos-User"
	HeaderProject = "X-Mnemos-Project"
	// HeaderAgentSession names the agent's session (a memory write names
	// its session in HeaderSession instead); Claude Code sends
	// HeaderClaudeCodeSession by itself.
	HeaderAgentSession      = "X-Mnemos-Session"
	HeaderClaudeCodeSession = "X-Claude-Code-Session-Id"
	// HeaderAPIKey carries the API key when Authorization does not.
	HeaderAPIKey = "X-Api-Key" //nolint:gosec // a header name, not a credential
)

// agentKey reads the API key of an agent's request: 'Authorization: Bearer
// <key>' or 'x-api-key: <key>' (both only when they agree).
func agentKey(r *http.Request) (string, *credentialError) {
	keys := r.Header.Values(HeaderAPIKey)
	if len(keys) > 1 {
		return "", &credentialError{http.StatusBadRequest, "ambiguous_credentials", fmt.Sprintf("%d %s headers; send the API key once", len(keys), HeaderAPIKey)}
	}
	if len(r.Header.Values("Authorization")) == 0 {
		if len(keys) == 0 || keys[0] == "" {
			return "", &credentialError{http.StatusUnauthorized, "unauthorized", "send the API key as 'Authorization: Bearer <key>' or 'x-api-key: <key>'"}
		}
		return keys[0], nil
	}
	key, cerr := bearerKey(r)
	if cerr == nil && len(keys) == 1 && keys[0] != key {
		return "", &credentialError{http.StatusBadRequest, "ambiguous_credentials", "Authorization and " + HeaderAPIKey + " name different keys; send one"}
	}
	return key, cerr
}
