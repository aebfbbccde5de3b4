package assembly

import (
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// CachePrices are a provider's prompt-cache prices relative to plain
// input: a token read from the cache, and a token written to it.
type CachePrices struct {
	Read, Write float64
}

// ByCost is micro-compaction by cost: it clears the results older than the
// keep most recent once keeping them has cost as much as clearing them
// would (see docs/compaction.md, "Clearing by cost").
//
// Clearing rewrites the cache from the first cleared result on: every
// token after it, cleared results included as their short replacements, is
// written again instead of read, at Write − Read more each. Not clearing
// costs a read of each old result every call. Nobody knows how many calls
// a session has left, so the rule waits until the calls since a result
// became clearable (it had keep newer results), before this one, have paid, in reads of it,
// as much as the rewrite costs, and then clears them all: the ski-rental
// rule, which never pays more than twice what knowing the future would.
//
// results are Compactable's for msgs; pending what the client sent that
// the session has not stored. It returns the tool_use ids to clear, in
// conversation order, or nil.
func ByCost(msgs []view.Message, results []Result, pending Pending, keep int, prices CachePrices) []string {
	if keep < 1 || len(results) == 0 || prices.Write <= prices.Read {
		return nil
	}
	var last int64 // the round of the last stored message
	for _, m := range msgs {
		last = max(last, m.Round)
	}
	current := last + max(pending.Rounds, 1)
	// came is the round each result came in, stored ones first.
	came := make([]int64, 0, len(results)+len(pending.Results))
	for _, r := range results {
		came = append(came, msgs[r.Message].Round)
	}
	for _, p := range pending.Results {
		came = append(came, last+p)
	}
	var (
		ids           []string
		waste, saving float64
		first         = -1
	)
	for i, r := range results {
		if i+keep >= len(came) {
			break // fewer than keep results after it
		}
		if r.Saving() <= 0 {
			continue
		}
		// It became clearable when its keep-th newer result came: every
		// call since read it for nothing — but the call that brought it,
		// which had to send it (a history sent in one call brings its
		// results and the newer ones together).
		if calls := current - max(came[i+keep], came[i]+1); calls > 0 {
			waste += prices.Read * float64(r.Saving()) * float64(calls)
		}
		if first < 0 {
			first = r.Message
		}
		ids = append(ids, r.ToolUseID)
		saving += float64(r.Saving())
	}
	if len(ids) == 0 {
		return nil
	}
	// What is written again: the stored messages from the first cleared
	// result on, once cleared, and the client's messages sent before this
	// call that the session has not stored.
	after := float64(pending.Sent) - saving
	for _, m := range msgs[first:] {
		after += float64(m.Tokens)
	}
	if waste < (prices.Write-prices.Read)*after {
		return nil
	}
	return ids
}

// Pending is what ByCost needs to know of the client's messages the
// session has not stored.
type Pending struct {
	// Results are the rounds, counted from 1 after the last stored one, of
	// the compactable tool results, in order.
	Results []int64
	// Rounds is how many calls the messages span, the current one
	// included: one more than their assistant messages (0 without any).
	Rounds int64
	// Sent estimates the messages sent in the calls before the current one
	// (up to the last assistant message), which the cache holds.
	Sent int64
}

// pendingOf is the Pending of the client's messages pending, a round
// ending at each assistant message. A result's tool is named by a tool_use
// in pending or in msgs.
func pendingOf(msgs []view.Message, pending []turn.Message, tools ToolSet) Pending {
	if len(pending) == 0 {
		return Pending{}
	}
	names := map[string]string{}
	for _, m := range msgs {
		named(names, m.Role, m.Content)
	}
	for _, m := range pending {
		named(names, m.Role, m.Content)
	}
	p := Pending{Rounds: 1}
	var round int64
	for _, m := range pending {
		round += tokens.EstimateContent(m.Content)
		if m.Role == "assistant" {
			p.Rounds++
			p.Sent, round = p.Sent+round, 0
			continue
		}
		for _, b := range m.Content {
			if b.Type == turn.BlockToolResult && tools.Has(names[b.ToolUseID]) {
				p.Results = append(p.Results, p.Rounds)
			}
		}
	}
	return p
}

// named adds the tool_use blocks of an assistant's content to names.
func named(names map[string]string, role string, c turn.Content) {
	if role != "assistant" {
		return
	}
	for _, b := range c {
		if b.Type == turn.BlockToolUse {
			names[b.ID] = b.Name
		}
	}
}
