package recall

import (
	_ "embed" // the selector's prompt
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

//go:embed prompts/selector.md
var systemPromptText string

// SystemPrompt is the selector's instructions (prompts/selector.md); %d is
// the most memories it may pick. It is the same for every call of a tenant,
// so providers cache it.
var SystemPrompt = strings.TrimSpace(systemPromptText)

// Lines of the selector's request, which the builtin selector reads back.
const (
	toolsLine     = "Tools just used: "
	memoriesLine  = "Memories:"
	requestLine   = "Request:"
	noTools       = "none"
	memoryBullet  = "- "
	matchLabel    = "match "
	answerField   = "memories"
	maxQueryBytes = 8 << 10
)

// Candidate is a memory the selector may pick.
type Candidate struct {
	Header memory.Header
	// Ref is how the selector names it (see Ref).
	Ref string
	// Score is how well the request's words match the memory's name,
	// description and body (search.RankMemories with Background); 0 for a
	// memory listed for being recent.
	Score float64
}

// request builds the selector's call: the prompt, one user message listing
// the tools just used, the candidates (a scored one with its score, cut to
// one decimal, "match 4.2") and the request, and a JSON answer of at most
// max references. Forked (llm.Request.Session), the selector
// also sees the agent's conversation that led to the request.
func request(tenant, session, query string, tools []string, cands []Candidate, max int, now time.Time) llm.Request {
	var named []string
	for _, t := range tools {
		if t = strings.TrimSpace(t); t != "" && !strings.ContainsAny(t, ",\n") {
			named = append(named, t) // a name that would break the list is no tool name
		}
	}
	var b strings.Builder
	b.WriteString(toolsLine)
	if len(named) == 0 {
		b.WriteString(noTools)
	} else {
		b.WriteString(strings.Join(named, ", "))
	}
	b.WriteString("\n\n" + memoriesLine + "\n")
	for _, c := range cands {
		fmt.Fprintf(&b, "%s%s [%s, saved %s", memoryBullet, c.Ref, c.Header.Type, AgeText(AgeDays(c.Header.UpdatedAt, now)))
		if c.Score > 0 {
			// Cut, not rounded: a score shown at the floor is at it.
			b.WriteString(", " + matchLabel + strconv.FormatFloat(math.Floor(c.Score*10)/10, 'f', 1, 64))
		}
		fmt.Fprintf(&b, "]: %s\n", c.Header.Description)
	}
	b.WriteString("\n" + requestLine + "\n")
	b.WriteString(clipQuery(query))
	ask := turn.Content{{Type: turn.BlockText, Text: b.String()}}
	return llm.Request{
		Tenant: tenant, Task: llm.TaskRecall,
		System:     fmt.Sprintf(SystemPrompt, max),
		Messages:   []llm.Message{{Role: "user", Content: ask}},
		MaxTokens:  int64(200 + 60*max),
		JSONSchema: answerSchema(max),
		Session:    session,
		Ask:        ask,
	}
}

// clipQuery keeps the first maxQueryBytes of a request (at a character
// boundary): a selector judges by the gist, and a pasted log would only
// cost tokens.
func clipQuery(q string) string {
	q = strings.TrimSpace(q)
	if len(q) <= maxQueryBytes {
		return q
	}
	return strings.ToValidUTF8(q[:maxQueryBytes], "")
}

// answerSchema is the JSON Schema of the selector's answer:
// {"memories": ["ref", …]} with at most max items.
func answerSchema(max int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{%q:{"type":"array","items":{"type":"string"},"maxItems":%d,`+
		`"description":"references of the memories to show, most useful first"}},"required":[%q],"additionalProperties":false}`,
		answerField, max, answerField))
}

// parseAnswer reads the selector's answer.
func parseAnswer(text string) ([]string, error) {
	var a struct {
		Memories []string `json:"memories"`
	}
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("recall: the selector's answer is not the JSON asked for: %w", err)
	}
	if a.Memories == nil {
		return nil, fmt.Errorf("recall: the selector's answer has no %q list", answerField)
	}
	return a.Memories, nil
}

// resolve finds the candidate a selector's pick names: its reference, or
// its name alone (with or without ".md"; the most recently updated of that
// name when several scopes have one). ok is false for an invented name.
func resolve(pick string, cands []Candidate) (Candidate, bool) {
	p := strings.TrimSuffix(strings.Trim(strings.TrimSpace(pick), "`\"'"), ".md")
	for _, c := range cands {
		if c.Ref == p {
			return c, true
		}
	}
	for _, c := range cands {
		if string(c.Header.Name) == p {
			return c, true
		}
	}
	return Candidate{}, false
}
