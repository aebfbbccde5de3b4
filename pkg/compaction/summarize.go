package compaction

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// DefaultSummaryMaxTokens bounds the summary call's output when SummaryInput.MaxTokens is 0.
const DefaultSummaryMaxTokens = 20_000

// MaxPromptRetries is how many times Summarize retries a prompt that was too
// long, each time without more of the oldest rounds.
const MaxPromptRetries = 3

// SummaryInput is what Summarize summarizes, and how.
type SummaryInput struct {
	// Tenant attributes the call's usage.
	Tenant string
	// Messages are the messages to summarize, in order: the session's current
	// context, or for a partial compaction only the part to summarize.
	Messages []view.Message
	// Instructions are custom instructions (the tenant's default or a manual
	// request's), appended to the summary instructions.
	Instructions string
	// Model overrides the provider's compaction model when set.
	Model string
	// MaxTokens bounds the summary's output; 0 means DefaultSummaryMaxTokens.
	MaxTokens int64
	// Session, set when Messages are the session's whole context, lets the
	// call fork the agent's last request (llm.Request.Session): the
	// summary is then asked of the conversation as the agent sent it.
	Session string
}

// Summary is the outcome of Summarize.
type Summary struct {
	// Text is the summary, without the analysis the model wrote first.
	Text string
	// Model is the model that answered (the override when the provider did not say).
	Model string
	// Usage is the total over every call.
	Usage llm.Usage
	// Attempts is the number of calls made.
	Attempts int
	// Dropped is, for each retry, the number of round groups dropped from
	// the front before it.
	Dropped []int
	// DroppedMessages is how many leading messages of the input the last
	// call left out.
	DroppedMessages int
}

// Summarize asks the model for a summary of in.Messages (see docs/compaction.md). When
// the prompt is too long it drops the oldest round groups (see GroupRounds
// and DropForGap) and retries, at most MaxPromptRetries times. An answer
// without a summary is an *llm.Error of KindBadResponse. On error the
// returned Summary still reports the attempts, drops and usage so far.
func Summarize(ctx context.Context, p llm.Provider, in SummaryInput) (Summary, error) {
	sum := Summary{Model: in.Model}
	if len(in.Messages) == 0 {
		return sum, errors.New("compaction: summarize: no messages")
	}
	maxTokens := in.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultSummaryMaxTokens
	}
	groups := GroupRounds(in.Messages)
	start := 0 // first group sent
	for {
		if err := ctx.Err(); err != nil {
			return sum, fmt.Errorf("compaction: summarize: %w", err)
		}
		var msgs []view.Message
		for _, g := range groups[start:] {
			msgs = append(msgs, g.Messages...)
		}
		sum.DroppedMessages = len(in.Messages) - len(msgs)
		sum.Attempts++
		req := llm.Request{
			Tenant:    in.Tenant,
			Task:      llm.TaskCompaction,
			Model:     in.Model,
			System:    systemPrompt,
			Messages:  requestMessages(msgs, in.Instructions),
			MaxTokens: maxTokens,
		}
		if in.Session != "" && start == 0 {
			req.Session, req.Ask = in.Session, turn.Content{textBlock(instructions(in.Instructions))}
		}
		resp, err := p.Complete(ctx, req)
		if err == nil {
			sum.Usage = sum.Usage.Add(resp.Usage)
			if resp.Model != "" {
				sum.Model = resp.Model
			}
			sum.Text = parseSummary(resp.Text)
			if sum.Text == "" {
				return sum, fmt.Errorf("compaction: summarize (attempt %d): %w", sum.Attempts,
					&llm.Error{Kind: llm.KindBadResponse, Err: errors.New("the answer holds no summary")})
			}
			if n := int64(len(sum.Text)) / 4; n > 2*maxTokens {
				// Not what a model asked for at most maxTokens writes: a
				// server answering garbage. Stored, it would be a context
				// larger than the one it replaces.
				text := sum.Text
				sum.Text = ""
				return sum, fmt.Errorf("compaction: summarize (attempt %d): %w", sum.Attempts,
					&llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf("the summary is about %d tokens, the model was allowed %d (it starts %.80q)", n, maxTokens, text)})
			}
			return sum, nil
		}
		var le *llm.Error
		if !errors.As(err, &le) || le.Kind != llm.KindPromptTooLong || sum.Attempts > MaxPromptRetries {
			return sum, fmt.Errorf("compaction: summarize (attempt %d): %w", sum.Attempts, err)
		}
		n := DropForGap(groups[start:], le.Gap)
		if n == 0 {
			return sum, fmt.Errorf("compaction: summarize (attempt %d, nothing left to drop): %w", sum.Attempts, err)
		}
		start += n
		sum.Dropped = append(sum.Dropped, n)
	}
}

// parseSummary returns the summary in a model's answer: the analysis part
// (<analysis>…</analysis>, or everything after an unclosed <analysis>) is
// removed, then the body of <summary>…</summary> is taken, or the whole
// remaining text when there are no summary tags. The result is trimmed;
// "" means there is no summary.
func parseSummary(text string) string {
	const (
		openAnalysis  = "<analysis>"
		closeAnalysis = "</analysis>"
		openSummary   = "<summary>"
		closeSummary  = "</summary>"
	)
	stripAnalysis := func(s string) (string, bool) {
		i := strings.Index(s, openAnalysis)
		if i < 0 {
			return s, false
		}
		after := s[i+len(openAnalysis):]
		j := strings.Index(after, closeAnalysis)
		if j < 0 {
			return s[:i], true
		}
		return s[:i] + after[j+len(closeAnalysis):], true
	}
	rest, _ := stripAnalysis(text)
	if i := strings.Index(rest, openSummary); i >= 0 {
		body := rest[i+len(openSummary):]
		// The last closing tag: the summary quotes user messages verbatim, and
		// they may hold the tag themselves.
		if j := strings.LastIndex(body, closeSummary); j >= 0 {
			body = body[:j]
		}
		return strings.TrimSpace(body)
	}
	for stripped := true; stripped; {
		rest, stripped = stripAnalysis(rest)
	}
	return strings.TrimSpace(rest)
}

// Group is a run of consecutive messages of one API round.
type Group struct {
	// Round is the messages' view.Message.Round; 0 for the messages a compaction made.
	Round    int64
	Messages []view.Message
	// Tokens is the sum of the messages' estimates.
	Tokens int64
}

// GroupRounds splits messages into groups of consecutive messages that share
// an API round. The messages a compaction made (Round 0) come first in a
// context and so form the first group.
func GroupRounds(msgs []view.Message) []Group {
	var out []Group
	for i, m := range msgs {
		if i == 0 || m.Round != msgs[i-1].Round {
			out = append(out, Group{Round: m.Round})
		}
		g := &out[len(out)-1]
		g.Messages = append(g.Messages, m)
		g.Tokens += m.Tokens
	}
	return out
}

// gapUnknownShare is the share of groups dropped when the provider did not
// say how much too long the prompt was: 1/5 (20%).
const gapUnknownShare = 5

// DropForGap returns how many of the oldest groups to drop so that their
// tokens cover gap, the excess the provider reported. When gap is unknown
// (≤ 0) it is 20% of the groups, at least one. The last group is never
// dropped, so the result is at most len(groups)-1 (0 for one group or none).
func DropForGap(groups []Group, gap int64) int {
	limit := len(groups) - 1
	if limit <= 0 {
		return 0
	}
	n := 0
	if gap <= 0 {
		n = max(len(groups)/gapUnknownShare, 1)
	} else {
		var covered int64
		for n < len(groups) && covered < gap {
			covered += groups[n].Tokens
			n++
		}
	}
	return min(n, limit)
}
