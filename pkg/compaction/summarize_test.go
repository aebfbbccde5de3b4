package compaction_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// answer is a provider function that always replies with s.
func answer(s string, usage llm.Usage) func(context.Context, llm.Request) (llm.Response, error) {
	return func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{Text: s, Model: "model-x", StopReason: "end_turn", Usage: usage}, nil
	}
}

func smallConversation() []view.Message {
	return numbered(
		user(1, text("Please fix the failing test in pkg/a.")),
		assistant(1, thinking("let me look"), text("Reading it."), toolUse("t1", "Read", map[string]any{"file_path": "/r/pkg/a/a_test.go"})),
		user(2, toolResult("t1", "package a")),
		assistant(2, text("Found it.")),
	)
}

func TestSummarizeRequest(t *testing.T) {
	t.Parallel()

	p := &fakeProvider{fn: answer("<analysis>scratch notes</analysis>\n<summary>\n## 1. Primary Request and Intent\nFix the test.\n</summary>",
		llm.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5})}
	sum, err := compaction.Summarize(t.Context(), p, compaction.SummaryInput{
		Tenant:       "acme",
		Messages:     smallConversation(),
		Instructions: "Focus on the test names.",
		Model:        "override-model",
	})
	require.NoError(t, err)
	require.Equal(t, "## 1. Primary Request and Intent\nFix the test.", sum.Text)
	require.Equal(t, "model-x", sum.Model)
	require.Equal(t, 1, sum.Attempts)
	require.Empty(t, sum.Dropped)
	require.Zero(t, sum.DroppedMessages)
	require.Equal(t, llm.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 5}, sum.Usage)

	reqs := p.requests()
	require.Len(t, reqs, 1)
	req := reqs[0]
	require.Equal(t, "acme", req.Tenant)
	require.Equal(t, llm.TaskCompaction, req.Task)
	require.Equal(t, "override-model", req.Model)
	require.Equal(t, int64(compaction.DefaultSummaryMaxTokens), req.MaxTokens)
	require.Equal(t, int64(20_000), req.MaxTokens)
	require.Empty(t, req.Tools, "the summary call offers no tools")
	require.Empty(t, req.JSONSchema)
	require.Contains(t, req.System, "summar")
	requireValidRequest(t, req.Messages)

	// The transcript, then one user message ending with the instructions.
	require.Len(t, req.Messages, 5)
	require.Equal(t, turn.Content{text("Please fix the failing test in pkg/a.")}, req.Messages[0].Content)
	require.Equal(t, turn.Content{text("Reading it."), toolUse("t1", "Read", map[string]any{"file_path": "/r/pkg/a/a_test.go"})},
		req.Messages[1].Content, "thinking is dropped")
	last := req.Messages[4].Content
	require.Len(t, last, 1)
	instr := last[0].Text
	require.True(t, strings.HasPrefix(instr, compaction.InstructionsLead))
	require.Contains(t, instr, "<analysis>")
	require.Contains(t, instr, "<summary>")
	require.Contains(t, strings.ToLower(instr), "do not call any tools")
	at := 0
	for i, h := range compaction.Headings() {
		title := "## " + string(rune('1'+i)) + ". " + h
		j := strings.Index(instr[at:], title)
		require.GreaterOrEqual(t, j, 0, "heading %q in order", title)
		at += j + len(title)
	}
	require.True(t, strings.HasSuffix(instr, "Focus on the test names."), "custom instructions come last")

	// MaxTokens is the caller's when set; no custom instructions, no trailer.
	p2 := &fakeProvider{fn: answer("<summary>ok</summary>", llm.Usage{})}
	_, err = compaction.Summarize(t.Context(), p2, compaction.SummaryInput{Messages: smallConversation(), MaxTokens: 1234})
	require.NoError(t, err)
	req2 := p2.requests()[0]
	require.Equal(t, int64(1234), req2.MaxTokens)
	require.Empty(t, req2.Model)
	last2 := req2.Messages[len(req2.Messages)-1].Content
	require.NotContains(t, last2[len(last2)-1].Text, "Further instructions")
}

func TestSummarizeAnswers(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		answer string
		want   string // "" means a bad response
	}{
		{"analysis and summary", "<analysis>a</analysis>\n<summary>\nbody\n</summary>", "body"},
		{"summary only", "<summary>body</summary>", "body"},
		{"no tags", "  plain summary \n", "plain summary"},
		{"analysis without summary tags", "<analysis>think</analysis>\nthe rest", "the rest"},
		{"text around the summary", "Here it is:\n<summary>body</summary>\nthanks", "body"},
		{"unclosed summary", "<analysis>x</analysis><summary>cut short", "cut short"},
		{"summary quoting the tags", "<analysis>x</analysis><summary>user said </summary> and <analysis> here</summary>", "user said </summary> and <analysis> here"},
		{"analysis mentioning the summary tag", "<analysis>I will write <summary> next</analysis><summary>body</summary>", "body"},
		{"two analysis blocks, no summary", "<analysis>a</analysis>text<analysis>b</analysis>", "text"},
		{"empty", "", ""},
		{"blank", " \n\t", ""},
		{"analysis only", "<analysis>all thinking</analysis>", ""},
		{"unclosed analysis", "<analysis>ran out of tokens", ""},
		{"empty summary", "<analysis>a</analysis><summary>  </summary>", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, compaction.ParseSummary(tt.answer))

			p := &fakeProvider{fn: answer(tt.answer, llm.Usage{OutputTokens: 7})}
			sum, err := compaction.Summarize(t.Context(), p, compaction.SummaryInput{Messages: smallConversation()})
			require.Equal(t, 1, sum.Attempts)
			require.Equal(t, int64(7), sum.Usage.OutputTokens)
			if tt.want == "" {
				require.Error(t, err)
				require.Equal(t, llm.KindBadResponse, llm.KindOf(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, sum.Text)
		})
	}
}

func TestSummarizeRefusesASummaryLongerThanTheModelMayWrite(t *testing.T) {
	t.Parallel()
	in := compaction.SummaryInput{Messages: smallConversation(), MaxTokens: 100}
	// 100 tokens allowed; twice that, by the estimate, is the most taken.
	sum, err := compaction.Summarize(t.Context(), &fakeProvider{fn: answer(strings.Repeat("a", 800), llm.Usage{})}, in)
	require.NoError(t, err)
	require.Len(t, sum.Text, 800)
	sum, err = compaction.Summarize(t.Context(), &fakeProvider{fn: answer(strings.Repeat("a", 804), llm.Usage{})}, in)
	require.Error(t, err)
	require.Equal(t, llm.KindBadResponse, llm.KindOf(err))
	require.Empty(t, sum.Text, "nothing of it is kept")
	require.Equal(t, 1, sum.Attempts)
}

func TestSummarizeErrors(t *testing.T) {
	t.Parallel()

	_, err := compaction.Summarize(t.Context(), &fakeProvider{fn: answer("x", llm.Usage{})}, compaction.SummaryInput{})
	require.Error(t, err, "nothing to summarize")

	// An error other than prompt-too-long is returned at once, its kind kept.
	p := &fakeProvider{fn: func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{}, &llm.Error{Kind: llm.KindServer, Status: 500, Err: errors.New("boom")}
	}}
	sum, err := compaction.Summarize(t.Context(), p, compaction.SummaryInput{Messages: smallConversation()})
	require.Error(t, err)
	require.Equal(t, llm.KindServer, llm.KindOf(err))
	require.Equal(t, 1, sum.Attempts)
	require.Len(t, p.requests(), 1)

	// A canceled context makes no call.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	p = &fakeProvider{fn: answer("<summary>x</summary>", llm.Usage{})}
	_, err = compaction.Summarize(ctx, p, compaction.SummaryInput{Messages: smallConversation()})
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, p.requests())
}

func TestGroupRounds(t *testing.T) {
	t.Parallel()

	summary := view.Message{Position: -1, Role: "user", Content: turn.Content{text("summary")}, Tokens: 300}
	restored := view.Message{Position: -1, Role: "user", Content: turn.Content{text("file")}, Tokens: 200}
	msgs := []view.Message{
		summary, restored,
		{Round: 7, Role: "user", Tokens: 10}, {Round: 7, Role: "assistant", Tokens: 20},
		{Round: 8, Role: "user", Tokens: 30}, {Round: 8, Role: "assistant", Tokens: 40},
		{Round: 9, Role: "assistant", Tokens: 50},
	}
	groups := compaction.GroupRounds(msgs)
	require.Len(t, groups, 4)
	wantRounds := []int64{0, 7, 8, 9}
	wantTokens := []int64{500, 30, 70, 50}
	wantLens := []int{2, 2, 2, 1}
	for i, g := range groups {
		require.Equal(t, wantRounds[i], g.Round)
		require.Equal(t, wantTokens[i], g.Tokens)
		require.Len(t, g.Messages, wantLens[i])
	}
	require.Equal(t, msgs[2:4], groups[1].Messages)
	require.Empty(t, compaction.GroupRounds(nil))
}

func TestDropForGap(t *testing.T) {
	t.Parallel()

	groupsOf := func(tokens ...int64) []compaction.Group {
		out := make([]compaction.Group, len(tokens))
		for i, n := range tokens {
			out[i] = compaction.Group{Round: int64(i + 1), Tokens: n}
		}
		return out
	}
	ten := groupsOf(1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)
	tests := []struct {
		name   string
		groups []compaction.Group
		gap    int64
		want   int
	}{
		{"gap covered by the first group exactly", ten, 1000, 1},
		{"gap just over one group", ten, 1001, 2},
		{"gap of one token", ten, 1, 1},
		{"gap of 4,500 tokens", ten, 4500, 5},
		{"gap needs every group: keep the last", ten, 10_000, 9},
		{"gap larger than everything", ten, 1_000_000, 9},
		{"uneven groups", groupsOf(100, 5000, 200, 300), 5050, 2},
		{"empty groups count but cover nothing", groupsOf(0, 0, 700, 10), 500, 3},
		{"unknown gap: 20% of 10", ten, 0, 2},
		{"unknown gap: 20% of 12 rounds down", groupsOf(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 0, 2},
		{"unknown gap: 20% of 15", groupsOf(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 0, 3},
		{"unknown gap: at least one", groupsOf(1, 1, 1), 0, 1},
		{"negative gap is unknown", groupsOf(1, 1, 1, 1, 1), -5, 1},
		{"two groups, unknown gap", groupsOf(5, 5), 0, 1},
		{"one group is never dropped", groupsOf(50_000), 10, 0},
		{"one group, unknown gap", groupsOf(50_000), 0, 0},
		{"no groups", nil, 10, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, compaction.DropForGap(tt.groups, tt.gap))
		})
	}
}

// rounds is a conversation of n rounds (user text, assistant text), each
// message of 1,000 tokens, with a compaction summary (Round 0) in front.
func rounds(n int) []view.Message {
	out := []view.Message{{Position: -1, Role: "user", Content: turn.Content{text("earlier summary")}, Tokens: 1000}}
	for r := 1; r <= n; r++ {
		u := user(int64(r), text("question "+strconv.Itoa(r)))
		a := assistant(int64(r), text("answer "+strconv.Itoa(r)))
		u.Tokens, a.Tokens = 1000, 1000
		out = append(out, u, a)
	}
	return out
}

func tooLong(gap int64) error {
	return &llm.Error{Kind: llm.KindPromptTooLong, Status: 400, Gap: gap, Err: errors.New("prompt is too long")}
}

func TestSummarizePromptTooLong(t *testing.T) {
	t.Parallel()

	// 1 summary group (1,000 tokens) + 9 rounds of 2,000 tokens: 10 groups.
	tests := []struct {
		name string
		// errs are the errors of the first calls; the next call succeeds.
		errs         []error
		wantErr      bool
		wantAttempts int
		wantDropped  []int
		// wantFirst is the first text of the transcript in each request.
		wantFirst []string
	}{
		{
			name:         "gap covered after one retry",
			errs:         []error{tooLong(2500)}, // summary 1,000 + round 1 2,000 ≥ 2,500
			wantAttempts: 2, wantDropped: []int{2},
			wantFirst: []string{"earlier summary", "question 2"},
		},
		{
			name:         "two retries, then success",
			errs:         []error{tooLong(1000), tooLong(4001)}, // drop the summary; then rounds 1, 2 and 3
			wantAttempts: 3, wantDropped: []int{1, 3},
			wantFirst: []string{"earlier summary", "question 1", "question 4"},
		},
		{
			name:         "unknown gap drops 20% of the groups",
			errs:         []error{tooLong(0), tooLong(0)}, // 10 groups → 2; then 8 → 1
			wantAttempts: 3, wantDropped: []int{2, 1},
			wantFirst: []string{"earlier summary", "question 2", "question 3"},
		},
		{
			name:         "three retries, then success",
			errs:         []error{tooLong(0), tooLong(0), tooLong(0)},
			wantAttempts: 4, wantDropped: []int{2, 1, 1},
			wantFirst: []string{"earlier summary", "question 2", "question 3", "question 4"},
		},
		{
			name:         "still too long after three retries",
			errs:         []error{tooLong(1), tooLong(1), tooLong(1), tooLong(1), tooLong(1)},
			wantErr:      true,
			wantAttempts: 4, wantDropped: []int{1, 1, 1},
			wantFirst: []string{"earlier summary", "question 1", "question 2", "question 3"},
		},
		{
			name:         "the last group is never dropped",
			errs:         []error{tooLong(1_000_000), tooLong(1_000_000)},
			wantErr:      true,
			wantAttempts: 2, wantDropped: []int{9},
			wantFirst: []string{"earlier summary", "question 9"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			p := &fakeProvider{fn: func(_ context.Context, req llm.Request) (llm.Response, error) {
				calls++
				if calls <= len(tt.errs) {
					return llm.Response{}, tt.errs[calls-1]
				}
				return llm.Response{Text: "<summary>done</summary>", Model: "m", Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}}, nil
			}}
			msgs := rounds(9)
			sum, err := compaction.Summarize(t.Context(), p, compaction.SummaryInput{Messages: msgs})
			require.Equal(t, tt.wantAttempts, sum.Attempts)
			require.Equal(t, tt.wantDropped, sum.Dropped)
			reqs := p.requests()
			require.Len(t, reqs, tt.wantAttempts)
			for i, req := range reqs {
				requireValidRequest(t, req.Messages)
				require.Equal(t, tt.wantFirst[i], req.Messages[0].Content[0].Text, "request %d", i)
			}
			dropped := 0
			for _, n := range tt.wantDropped {
				dropped += n
			}
			if tt.wantErr {
				require.Error(t, err)
				require.Equal(t, llm.KindPromptTooLong, llm.KindOf(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, "done", sum.Text)
			require.Equal(t, llm.Usage{InputTokens: 10, OutputTokens: 3}, sum.Usage)
			// The summary group is one message, each round two.
			wantMsgs := 0
			if dropped > 0 {
				wantMsgs = 1 + (dropped-1)*2
			}
			require.Equal(t, wantMsgs, sum.DroppedMessages)
		})
	}
}

// requireValidRequest checks what the Messages API demands of a
// conversation, and what a summary request promises on top.
func requireValidRequest(t *testing.T, msgs []llm.Message) {
	t.Helper()
	require.NotEmpty(t, msgs)
	require.Equal(t, "user", msgs[0].Role, "the first message is the user's")
	require.Equal(t, "user", msgs[len(msgs)-1].Role, "the last message is the user's")
	for i, m := range msgs {
		require.Contains(t, []string{"user", "assistant"}, m.Role)
		require.NotEmpty(t, m.Content, "message %d has content", i)
		if i > 0 {
			require.NotEqual(t, msgs[i-1].Role, m.Role, "roles alternate at message %d", i)
		}
		var calls []string
		if i > 0 && msgs[i-1].Role == "assistant" {
			for _, b := range msgs[i-1].Content {
				if b.Type == turn.BlockToolUse {
					calls = append(calls, b.ID)
				}
			}
		}
		var results []string
		leading := true
		for _, b := range m.Content {
			require.NotContains(t, []string{turn.BlockThinking, turn.BlockRedactedThinking, turn.BlockImage, turn.BlockDocument}, b.Type,
				"message %d", i)
			require.Empty(t, b.CacheControl)
			switch b.Type {
			case turn.BlockText:
				require.NotEmpty(t, strings.TrimSpace(b.Text), "message %d has a blank text block", i)
				leading = false
			case turn.BlockToolUse:
				require.Equal(t, "assistant", m.Role, "message %d: tool_use in a user message", i)
				leading = false
			case turn.BlockToolResult:
				require.Equal(t, "user", m.Role, "message %d: tool_result in an assistant message", i)
				require.True(t, leading, "message %d: tool results come first", i)
				results = append(results, b.ToolUseID)
				if b.Content != nil {
					for _, nb := range *b.Content {
						require.Equal(t, turn.BlockText, nb.Type, "message %d: tool result content is text", i)
					}
				}
			default:
				t.Fatalf("message %d: unexpected block type %q", i, b.Type)
			}
		}
		if m.Role == "user" {
			require.ElementsMatch(t, calls, results, "message %d answers exactly the calls before it", i)
		}
	}
}
