package retention

import (
	"encoding/json"
	"strings"
	"unicode"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Tally is what a category had to keep and what it kept.
type Tally struct {
	Found int `json:"found"`
	Total int `json:"total"`
}

// Score is what a compaction kept of what must survive.
type Score struct {
	// Overall is the mean, over the categories that have items, of the share
	// of their items found; 1 when no category has any (nothing to lose).
	Overall float64
	// Categories holds every category's tally, those without items too.
	Categories map[string]Tally
	// Missing are the items not found, in Extract's order.
	Missing []Item
}

// Detail is the per-category tallies as stored and served:
// {"instructions": {"found": 3, "total": 4}, …}, every category present.
func (s Score) Detail() ([]byte, error) {
	return json.Marshal(s.Categories)
}

// Measure looks for items in what replaces their span: the messages of the
// compaction's head (summary, restored blocks, a kept prefix) and the
// messages it keeps, every text block, tool call (name and the strings of
// its input) and tool result of them. See the package doc for how items match.
func Measure(items []Item, replacement ...[]view.Message) Score {
	var h haystack
	h.b.WriteByte(' ')
	for _, msgs := range replacement {
		for _, m := range msgs {
			h.content(m.Content)
		}
	}
	hay := h.b.String()
	s := Score{Categories: make(map[string]Tally, len(Categories()))}
	for _, c := range Categories() {
		s.Categories[c] = Tally{}
	}
	for _, it := range items {
		t := s.Categories[it.Category]
		t.Total++
		if found(hay, it.keys) {
			t.Found++
		} else {
			s.Missing = append(s.Missing, it)
		}
		s.Categories[it.Category] = t
	}
	s.Overall = 1
	sum, n := 0.0, 0
	for _, c := range Categories() {
		if t := s.Categories[c]; t.Total > 0 {
			sum += float64(t.Found) / float64(t.Total)
			n++
		}
	}
	if n > 0 {
		s.Overall = sum / float64(n)
	}
	return s
}

// Of scores a compaction in one call: what must survive of span, looked
// for in head and kept.
func Of(span, head, kept []view.Message, names compaction.ToolNames) Score {
	return Measure(Extract(span, names), head, kept)
}

func found(hay string, keys []string) bool {
	for _, k := range keys {
		if strings.Contains(hay, k) {
			return true
		}
	}
	return false
}

// haystack is the normalized text of what replaces a span, between spaces.
type haystack struct{ b strings.Builder }

func (h *haystack) content(c turn.Content) {
	for _, b := range c {
		switch b.Type {
		case turn.BlockText:
			h.text(b.Text)
		case turn.BlockToolUse:
			h.text(b.Name)
			h.json(b.Input)
		case turn.BlockToolResult:
			if b.Content != nil {
				h.content(*b.Content)
			}
		}
	}
}

// json adds the strings of a tool call's input.
func (h *haystack) json(raw json.RawMessage) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			h.text(v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
}

func (h *haystack) text(s string) {
	appendNormalized(&h.b, s)
	if h.b.Len() > 0 && !strings.HasSuffix(h.b.String(), " ") {
		h.b.WriteByte(' ')
	}
}

// normalize returns the words of s, lowercased, joined by single spaces: a
// word is a run of letters, digits and underscores.
func normalize(s string) string {
	var b strings.Builder
	appendNormalized(&b, s)
	return strings.TrimSpace(b.String())
}

// normalizePrefix is the opening words of normalize(s), as many as fit
// in n bytes (at least one).
func normalizePrefix(s string, n int) string {
	k := normalize(s)
	if len(k) <= n {
		return k
	}
	if i := strings.LastIndexByte(k[:n+1], ' '); i > 0 {
		return k[:i]
	}
	first, _, _ := strings.Cut(k, " ")
	return first
}

func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// appendNormalized writes the words of s, lowercased, each followed by one
// space, after a space unless b ends with one.
func appendNormalized(b *strings.Builder, s string) {
	space := b.Len() == 0 || strings.HasSuffix(b.String(), " ")
	for _, r := range s {
		if isWordRune(r) {
			b.WriteRune(unicode.ToLower(r))
			space = false
			continue
		}
		if !space {
			b.WriteByte(' ')
			space = true
		}
	}
}
