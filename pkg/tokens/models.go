package tokens

import "strings"

// Context windows the model table knows.
const (
	// ClaudeWindow is the context window of every Claude model by default.
	ClaudeWindow int64 = 200_000
	// OneMillionWindow is the window of a model whose name carries OneMillionTag.
	OneMillionWindow int64 = 1_000_000
	// OneMillionTag in a model name (Claude Code's "claude-sonnet-4-5[1m]")
	// selects the 1M-token context window.
	OneMillionTag = "[1m]"
	// UnknownMaxOutput is the default max output tokens of a model the table does not know.
	UnknownMaxOutput int64 = 32_000
)

// ModelInfo is what the table knows about a model family.
type ModelInfo struct {
	// Family is the table entry that matched, e.g. "claude-opus-4-1".
	Family string
	// Window is the context window in tokens.
	Window int64
	// MaxOutput is the default max output tokens of a request.
	MaxOutput int64
}

// modelTable is ordered longest family first, so "claude-opus-4-1" wins over
// "claude-opus-4". A family matches a model name that starts with it and
// continues with nothing or a separator ("-20250805", "@20250805", ":0").
var modelTable = []ModelInfo{
	{Family: "claude-sonnet-4-6", Window: ClaudeWindow, MaxOutput: 64_000},
	{Family: "claude-opus-4-6", Window: ClaudeWindow, MaxOutput: 64_000},
	{Family: "claude-sonnet-4-5", Window: ClaudeWindow, MaxOutput: 64_000},
	{Family: "claude-haiku-4-5", Window: ClaudeWindow, MaxOutput: 64_000},
	{Family: "claude-opus-4-5", Window: ClaudeWindow, MaxOutput: 64_000},
	{Family: "claude-opus-4-1", Window: ClaudeWindow, MaxOutput: 32_000},
	{Family: "claude-3-7-sonnet", Window: ClaudeWindow, MaxOutput: 64_000},
	{Family: "claude-sonnet-4", Window: ClaudeWindow, MaxOutput: 64_000},
	{Family: "claude-opus-4", Window: ClaudeWindow, MaxOutput: 32_000},
	{Family: "claude-3-5", Window: ClaudeWindow, MaxOutput: 8_192},
	{Family: "claude-3", Window: ClaudeWindow, MaxOutput: 4_096},
	{Family: "gpt-4.1", Window: 1_047_576, MaxOutput: 32_768},
	{Family: "gpt-4o", Window: 128_000, MaxOutput: 16_384},
}

// ModelName is a model id as the tables look it up: lower case, without
// the [1m] tag (oneMillion reports it), a provider path, or the region and
// vendor that Bedrock and similar ids put before the family.
func ModelName(model string) (name string, oneMillion bool) {
	name = strings.ToLower(strings.TrimSpace(model))
	oneMillion = strings.Contains(name, OneMillionTag)
	if oneMillion {
		name = strings.ReplaceAll(name, OneMillionTag, "")
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	for _, marker := range []string{"claude-", "gpt-"} {
		if i := strings.Index(name, marker); i > 0 {
			name = name[i:]
			break
		}
	}
	return name, oneMillion
}

// LookupModel finds a model's family in the table. The name may carry a
// provider prefix ("us.anthropic.claude-…", "openai/gpt-4o"), a date or
// version suffix, and the OneMillionTag, which sets the window to
// OneMillionWindow. The second result is false for a model the table does not
// know; its info then holds UnknownMaxOutput and, only when tagged [1m], a window.
func LookupModel(model string) (ModelInfo, bool) {
	name, oneMillion := ModelName(model)
	info, ok := ModelInfo{MaxOutput: UnknownMaxOutput}, false
	for _, m := range modelTable {
		if familyMatches(name, m.Family) {
			info, ok = m, true
			break
		}
	}
	if oneMillion {
		info.Window = OneMillionWindow
	}
	return info, ok
}

func familyMatches(name, family string) bool {
	if !strings.HasPrefix(name, family) {
		return false
	}
	if len(name) == len(family) {
		return true
	}
	switch name[len(family)] {
	case '-', '@', ':', '_':
		return true
	}
	return false
}
