package api

import "time"

// SearchResult is the answer to GET /v1/scopes/{scope}/search: the best
// hits among the scope's memories and the messages of its sessions, best
// first.
type SearchResult struct {
	Scope string      `json:"scope"`
	Query string      `json:"query"`
	Hits  []SearchHit `json:"hits"`
}

// SearchHit is one memory or message a search found. A message is named
// by its session and position, a memory by its name.
type SearchHit struct {
	// Source is "memory" or "message".
	Source   string `json:"source"`
	Session  string `json:"session,omitempty"`
	Position *int64 `json:"position,omitempty"`
	Memory   string `json:"memory,omitempty"`
	// Role is a message's role ("user", "assistant"); memories have none.
	Role string `json:"role,omitempty"`
	// Time is when the message was stored or the memory last updated.
	Time time.Time `json:"time"`
	// Score is the hit's relevance, higher is better; scores compare
	// within one answer only.
	Score float64 `json:"score"`
	// Snippet is the text around the query's words, each between « and ».
	Snippet string `json:"snippet"`
}
