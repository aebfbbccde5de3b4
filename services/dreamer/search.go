package dreamer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// ToolSearch is the dreamer's own tool: a narrow full-text search over the
// past sessions of the scope being consolidated.
const ToolSearch = "transcript_search"

const (
	// maxQueryChars bounds a search query.
	maxQueryChars = 200
	// maxSnippetChars bounds one snippet, whatever the headline made.
	maxSnippetChars = 400
)

const searchSchema = `{"type": "object", "properties": {
	"query": {"type": "string", "description": "Words to look for: a name, an error, a decision. \"Quoted phrases\" match as phrases, 'or' joins alternatives, a leading '-' excludes a word.", "maxLength": 200},
	"limit": {"type": "integer", "description": "How many matching messages to return, newest first (at most %d).", "minimum": 1, "maximum": %d}
}, "required": ["query"], "additionalProperties": false}`

// searchTool is transcript_search bound to a dream's scope.
func (s *Service) searchTool(l Lease, set tenantcfg.Dreaming) memtools.Tool {
	def := llm.Tool{
		Name: ToolSearch,
		Description: fmt.Sprintf("Search the messages of past sessions of %s (only those) for words, newest first. "+
			"Returns at most %d matching messages, each as a short snippet around the match with its session and date; never whole transcripts. "+
			"Search narrowly, for something specific; search again with other words rather than broadly.", l.Scope, set.SearchMaxHits),
		InputSchema: json.RawMessage(fmt.Sprintf(searchSchema, set.SearchMaxHits, set.SearchMaxHits)),
	}
	return memtools.Tool{Def: def, Run: func(ctx context.Context, input json.RawMessage) (memtools.Result, error) {
		return s.search(ctx, l, set, input)
	}}
}

func (s *Service) search(ctx context.Context, l Lease, set tenantcfg.Dreaming, input json.RawMessage) (memtools.Result, error) {
	refuse := func(format string, args ...any) (memtools.Result, error) {
		err := s.memories.Refused(ctx, memory.ActorDreamer, memory.Refuse(memory.ReasonBadRequest, format, args...))
		return memtools.Result{Text: "Refused: " + err.Error(), IsError: true}, nil
	}
	var in struct {
		Query string `json:"query"`
		Limit int    `json:"limit"`
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return refuse("the input of %s: %v; it takes query and, optionally, limit", ToolSearch, err)
	}
	in.Query = strings.TrimSpace(in.Query)
	switch {
	case in.Query == "":
		return refuse("%s needs a query: the words to look for", ToolSearch)
	case utf8.RuneCountInString(in.Query) > maxQueryChars || !utf8.ValidString(in.Query) || strings.ContainsRune(in.Query, 0):
		return refuse("the query is longer than %d characters or not valid text: search for something specific", maxQueryChars)
	case in.Limit < 0:
		return refuse("limit %d: want 1 to %d", in.Limit, set.SearchMaxHits)
	}
	limit := set.SearchMaxHits
	if in.Limit > 0 {
		limit = min(in.Limit, limit)
	}
	options := fmt.Sprintf(`MaxWords=%d, MinWords=%d, MaxFragments=2, FragmentDelimiter=" … ", StartSel=«, StopSel=»`,
		set.SnippetWords, max(set.SnippetWords/3, 3))
	var hits []store.MessageHit
	var terms string
	err := s.store.InTx(ctx, l.Tenant, func(tx *store.Tx) error {
		var err error
		if terms, err = tx.SearchTerms(ctx, in.Query); err != nil || terms == "" || terms == "T" {
			return err
		}
		hits, err = tx.SearchMessages(ctx, scopeFilter(l.Scope), in.Query, options, limit)
		return err
	})
	if err != nil {
		return memtools.Result{}, err
	}
	if terms == "" || terms == "T" {
		return refuse("the query %q holds no word to search for", in.Query)
	}
	if len(hits) == 0 {
		return memtools.Result{Text: fmt.Sprintf("No message of the sessions of %s matches %q.", l.Scope, in.Query)}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d messages of the sessions of %s match %q, newest first (snippets; matches between « »):\n", len(hits), l.Scope, in.Query)
	for _, h := range hits {
		snippet := strings.Join(strings.Fields(h.Snippet), " ")
		if utf8.RuneCountInString(snippet) > maxSnippetChars {
			snippet = string([]rune(snippet)[:maxSnippetChars-1]) + "…"
		}
		fmt.Fprintf(&b, "- %s, session %s, message %d (%s): %s\n", h.CreatedAt.UTC().Format("2006-01-02 15:04"), h.SessionID, h.Position, h.Role, snippet)
	}
	return memtools.Result{Text: strings.TrimSuffix(b.String(), "\n")}, nil
}
