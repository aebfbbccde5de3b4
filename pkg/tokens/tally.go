package tokens

import "github.com/mnemos-ai/mnemos/pkg/turn"

// Tally is a session's running count (see docs/token-accounting.md): the last response's usage
// plus the estimate of every message added after it; before any usage, the
// estimate of everything times 4/3. It is a value the service persists.
type Tally struct {
	// Baseline is the last response's input side plus its output (see ResponseOutput).
	Baseline int64 `json:"baseline"`
	// HasUsage is false until the first response, and again after a compaction boundary.
	HasUsage bool `json:"has_usage"`
	// Pending is the estimate of the messages added after the last response.
	Pending int64 `json:"pending"`
}

// Count is the session's current token count.
func (t Tally) Count() int64 {
	if t.HasUsage {
		return t.Baseline + t.Pending
	}
	return ceilDiv(t.Pending*4, 3)
}

// Add counts a message added after the last response, by its estimate.
func (t *Tally) Add(estimate int64) {
	t.Pending += estimate
}

// SetResponse makes a response the new baseline: its usage's input side plus
// ResponseOutput. Everything pending before it is inside that input side.
func (t *Tally) SetResponse(u turn.Usage, content turn.Content) {
	t.Baseline = u.InputSide() + ResponseOutput(u, content)
	t.Pending = 0
	t.HasUsage = true
}

// Reset starts over at a compaction boundary: no usage, nothing pending.
func (t *Tally) Reset() {
	*t = Tally{}
}

// ResponseOutput is the output a response counts for: its recorded
// output_tokens, unless that is below the estimate of its own content (usage
// captured at stream start), in which case the estimate.
func ResponseOutput(u turn.Usage, content turn.Content) int64 {
	return max(u.OutputTokens, EstimateContent(content))
}

// ceilDiv is a/b rounded up, for a >= 0 and b > 0.
func ceilDiv(a, b int64) int64 {
	return (a + b - 1) / b
}
