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

// Windows of OpenAI models (see docs/token-accounting.md for the sources).
const (
	// GPT5Window is the input a gpt-5 family model takes: 272,000 tokens of
	// its 400,000-token context, whose other 128,000 are its output. A count
	// is the request's input side, so this is the window it is held to.
	GPT5Window int64 = 272_000
	// GPT5LongWindow is the input of the gpt-5.4, gpt-5.5 and gpt-5.6
	// models: 922,000 tokens of their 1,050,000-token context, less their
	// 128,000 of output.
	GPT5LongWindow int64 = 922_000
	// GPT41Window is the gpt-4.1 family's context window.
	GPT41Window int64 = 1_047_576
	// OSeriesWindow is the context window of the o1, o3 and o4-mini reasoning models.
	OSeriesWindow int64 = 200_000
	// GPT4oWindow is the context window of gpt-4o and the chat-tuned models.
	GPT4oWindow int64 = 128_000
)

// Encodings a model's tokens are counted in (see CounterFor).
const (
	// EncodingO200k is OpenAI's o200k_base, the encoding of every OpenAI
	// model the table knows.
	EncodingO200k = "o200k_base"
)

// ModelInfo is what the table knows about a model family.
type ModelInfo struct {
	// Family is the table entry that matched, e.g. "claude-opus-4-1".
	Family string
	// Window is the context window in tokens.
	Window int64
	// MaxOutput is the default max output tokens of a request.
	MaxOutput int64
	// Encoding names the BPE encoding the family's tokenizer uses when it is
	// public (EncodingO200k); empty when it is not, as for Claude models,
	// whose counts are estimated.
	Encoding string
}

// modelTable holds the families the table knows. Lookup takes the longest
// family that matches, so "claude-opus-4-1" wins over "claude-opus-4" and
// "gpt-5-chat" over "gpt-5". A family matches a model name that starts with
// it and continues with nothing or a separator ("-20250805", "@20250805",
// ":0", "-mini").
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

	// OpenAI: gpt-5.6 (-sol, -terra, -luna), gpt-5.5, gpt-5.4 take the long
	// window, gpt-5.4-mini and -nano the gpt-5 one; gpt-5.3-codex; gpt-5.2;
	// gpt-5.1 and its codex models; gpt-5, gpt-5-mini, gpt-5-nano,
	// gpt-5-codex. The chat-tuned models ("gpt-5-chat-latest") have a
	// smaller window.
	{Family: "gpt-5.6", Window: GPT5LongWindow, MaxOutput: 128_000, Encoding: EncodingO200k},
	{Family: "gpt-5.5", Window: GPT5LongWindow, MaxOutput: 128_000, Encoding: EncodingO200k},
	{Family: "gpt-5.4-mini", Window: GPT5Window, MaxOutput: 128_000, Encoding: EncodingO200k},
	{Family: "gpt-5.4-nano", Window: GPT5Window, MaxOutput: 128_000, Encoding: EncodingO200k},
	{Family: "gpt-5.4", Window: GPT5LongWindow, MaxOutput: 128_000, Encoding: EncodingO200k},
	{Family: "gpt-5.3", Window: GPT5Window, MaxOutput: 128_000, Encoding: EncodingO200k},
	{Family: "gpt-5.2-chat", Window: GPT4oWindow, MaxOutput: 16_384, Encoding: EncodingO200k},
	{Family: "gpt-5.1-chat", Window: GPT4oWindow, MaxOutput: 16_384, Encoding: EncodingO200k},
	{Family: "gpt-5-chat", Window: GPT4oWindow, MaxOutput: 16_384, Encoding: EncodingO200k},
	{Family: "gpt-5.2", Window: GPT5Window, MaxOutput: 128_000, Encoding: EncodingO200k},
	{Family: "gpt-5.1", Window: GPT5Window, MaxOutput: 128_000, Encoding: EncodingO200k},
	{Family: "gpt-5", Window: GPT5Window, MaxOutput: 128_000, Encoding: EncodingO200k},
	// gpt-4.1, gpt-4.1-mini, gpt-4.1-nano.
	{Family: "gpt-4.1", Window: GPT41Window, MaxOutput: 32_768, Encoding: EncodingO200k},
	// gpt-4o, gpt-4o-mini, chatgpt-4o-latest (read as gpt-4o-latest).
	{Family: "gpt-4o", Window: GPT4oWindow, MaxOutput: 16_384, Encoding: EncodingO200k},
	// o3, o3-mini, o3-pro; o4-mini; o1; codex-mini-latest (built on o4-mini).
	{Family: "o4-mini", Window: OSeriesWindow, MaxOutput: 100_000, Encoding: EncodingO200k},
	{Family: "o3", Window: OSeriesWindow, MaxOutput: 100_000, Encoding: EncodingO200k},
	{Family: "o1-mini", Window: GPT4oWindow, MaxOutput: 65_536, Encoding: EncodingO200k},
	{Family: "o1", Window: OSeriesWindow, MaxOutput: 100_000, Encoding: EncodingO200k},
	{Family: "codex-mini", Window: OSeriesWindow, MaxOutput: 100_000, Encoding: EncodingO200k},
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
		if familyMatches(name, m.Family) && len(m.Family) > len(info.Family) {
			info, ok = m, true
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
