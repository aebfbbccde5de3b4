// Package accounting holds the token accountant's decisions that more than
// one service needs: which tool results leave the context (offload), and a
// session's token status, so the accountant and the gateway's pre-flight
// answer with the same function.
package accounting

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Offload says when a tool result is kept out of the context (see docs/token-accounting.md).
type Offload struct {
	// ThresholdChars: a single tool result longer than this is offloaded.
	ThresholdChars int `json:"threshold_chars"`
	// PreviewBytes of the result stay in context, inside <persisted-output>.
	PreviewBytes int `json:"preview_bytes"`
	// TurnCapChars bounds the tool-result characters one turn may add; the
	// largest results are offloaded until the rest fits.
	TurnCapChars int `json:"turn_cap_chars"`
}

// DefaultOffload is docs/token-accounting.md's numbers.
func DefaultOffload() Offload {
	return Offload{ThresholdChars: 50_000, PreviewBytes: 2_000, TurnCapChars: 200_000}
}

// Validate reports settings that cannot work.
func (o Offload) Validate() error {
	if o.ThresholdChars <= 0 || o.PreviewBytes <= 0 || o.TurnCapChars <= 0 {
		return fmt.Errorf("offload: threshold_chars, preview_bytes and turn_cap_chars must be above zero, got %d, %d, %d",
			o.ThresholdChars, o.PreviewBytes, o.TurnCapChars)
	}
	if o.PreviewBytes >= o.ThresholdChars {
		return fmt.Errorf("offload: preview_bytes (%d) must be below threshold_chars (%d)", o.PreviewBytes, o.ThresholdChars)
	}
	return nil
}

// ToolResultID names the stored copy of an offloaded tool result
// deterministically: a retried transaction stores the same id, and the
// proxy writes the preview of a round the accountant has not applied yet
// byte for byte as the accountant will store it.
func ToolResultID(tenant, session, toolUseID string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("mnemos:tool-result:"+tenant+"/"+session+"/"+toolUseID)).String()
}

// Decision is one tool result taken out of the context.
type Decision struct {
	MessageUUID  string
	ToolUseID    string
	ToolResultID string
	// Original is the whole result as the backend sent it (text, or the JSON of a block array).
	Original  string
	SizeChars int
	// Replacement is the text shown in context instead.
	Replacement string
	// Recorded is true when the decision was made earlier and is only reused.
	Recorded bool
}

// Frozen looks up a decision recorded earlier for a tool_use id. A nil
// Frozen knows no decision.
type Frozen func(toolUseID string) (replacement string, ok bool, err error)

// Apply replaces offloaded tool results in msgs (one turn's messages) and
// returns the new messages and the decisions. A decision recorded earlier
// always wins, so the same tool result renders the same bytes forever.
// idFor names the stored copy of a new decision's result.
func (o Offload) Apply(msgs []turn.Message, frozen Frozen, idFor func(toolUseID string) string) ([]turn.Message, []Decision, error) {
	type candidate struct {
		msg, block int
		size       int
		text       string
	}
	var cands []candidate
	total := 0
	for mi, m := range msgs {
		for bi, b := range m.Content {
			if b.Type != turn.BlockToolResult || b.Content == nil {
				continue
			}
			text := resultText(*b.Content)
			size := utf8.RuneCountInString(text)
			total += size
			cands = append(cands, candidate{msg: mi, block: bi, size: size, text: text})
		}
	}
	if len(cands) == 0 {
		return msgs, nil, nil
	}

	chosen := make(map[int]bool)     // index into cands
	recorded := make(map[int]string) // index into cands → replacement decided earlier
	// Frozen decisions first: they stand whatever the sizes say now.
	if frozen == nil {
		frozen = func(string) (string, bool, error) { return "", false, nil }
	}
	for i, c := range cands {
		b := msgs[c.msg].Content[c.block]
		repl, ok, err := frozen(b.ToolUseID)
		if err != nil {
			return nil, nil, fmt.Errorf("accounting.Offload: %w", err)
		}
		if ok {
			chosen[i] = true
			recorded[i] = repl
			total -= c.size
		}
	}
	for i, c := range cands {
		if !chosen[i] && c.size > o.ThresholdChars {
			chosen[i] = true
			total -= c.size
		}
	}
	if total > o.TurnCapChars {
		order := make([]int, 0, len(cands))
		for i := range cands {
			if !chosen[i] {
				order = append(order, i)
			}
		}
		sort.SliceStable(order, func(a, b int) bool { return cands[order[a]].size > cands[order[b]].size })
		for _, i := range order {
			if total <= o.TurnCapChars {
				break
			}
			chosen[i] = true
			total -= cands[i].size
		}
	}

	out := make([]turn.Message, len(msgs))
	copy(out, msgs)
	copied := make(map[int]bool)
	var decisions []Decision
	for i, c := range cands {
		if !chosen[i] {
			continue
		}
		b := out[c.msg].Content[c.block]
		d := Decision{MessageUUID: out[c.msg].UUID, ToolUseID: b.ToolUseID, Original: c.text, SizeChars: c.size}
		if repl, ok := recorded[i]; ok {
			d.Replacement, d.Recorded = repl, true
		} else {
			d.ToolResultID = idFor(b.ToolUseID)
			d.Replacement = o.preview(c.text, c.size, d.ToolResultID)
		}
		decisions = append(decisions, d)
		if !copied[c.msg] { // never write into the caller's block slice
			out[c.msg].Content = append(turn.Content(nil), out[c.msg].Content...)
			copied[c.msg] = true
		}
		repl := turn.Content{{Type: turn.BlockText, Text: d.Replacement}}
		b.Content = &repl
		out[c.msg].Content[c.block] = b
	}
	return out, decisions, nil
}

// preview is the text left in context for an offloaded result.
func (o Offload) preview(text string, size int, id string) string {
	head := text
	if len(head) > o.PreviewBytes {
		cut := o.PreviewBytes
		for cut > 0 && !utf8.RuneStart(head[cut]) {
			cut--
		}
		head = head[:cut]
	}
	var sb strings.Builder
	sb.WriteString("<persisted-output>\n")
	fmt.Fprintf(&sb, "This tool result was %d characters, too large to keep in context. ", size)
	fmt.Fprintf(&sb, "The whole result is stored as tool result %s (GET /v1/tool-results/%s).\n", id, id)
	fmt.Fprintf(&sb, "First %d bytes:\n", len(head))
	sb.WriteString(head)
	if len(head) < len(text) {
		sb.WriteString("\n…")
	}
	sb.WriteString("\n</persisted-output>")
	return sb.String()
}

// resultText is a tool result's content as one string: the text of a plain
// string result, or the JSON of a block array (which may hold images).
func resultText(c turn.Content) string {
	if len(c) == 1 && c[0].Type == turn.BlockText {
		return c[0].Text
	}
	allText := true
	for _, b := range c {
		if b.Type != turn.BlockText {
			allText = false
			break
		}
	}
	if allText {
		parts := make([]string, len(c))
		for i, b := range c {
			parts[i] = b.Text
		}
		return strings.Join(parts, "\n")
	}
	// turn.Marshal, not json.Marshal: the stored copy keeps <, > and & as
	// the backend sent them, and its size is counted on those bytes.
	enc, err := turn.Marshal(c)
	if err != nil {
		return ""
	}
	return string(enc)
}
