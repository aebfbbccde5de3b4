package tokens

import (
	"math"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Calibration bounds: a factor learnt from one response moves the next
// estimate at most this far, so one odd response (a client that injects a
// large reminder once) cannot wreck the count.
const (
	// CalibrateMin is the smallest pending estimate a response calibrates
	// from: below it the rounding and the client's fixed framing dominate.
	CalibrateMin int64 = 200
	// MinFactor and MaxFactor bound the calibration factor.
	MinFactor = 0.5
	MaxFactor = 2.5
	// calibrateScale is the pending estimate at which the latest ratio
	// weighs as much as the factor so far: a ratio learnt from a large
	// growth says more than one from a few hundred tokens of framing.
	calibrateScale = 2000.0
)

// Tally is a session's running count (see docs/token-accounting.md): the last response's usage
// plus the estimate of every message added after it, times the session's
// calibration factor; before any usage, the prefix (system prompt and tools)
// plus that, or, with no prefix known, the estimate times 4/3. It is a value
// the service persists.
type Tally struct {
	// Baseline is the last response's input side plus its output (see ResponseOutput).
	Baseline int64 `json:"baseline"`
	// HasUsage is false until the first response, and again after a compaction boundary.
	HasUsage bool `json:"has_usage"`
	// Pending is the estimate of the messages added after the last response,
	// before calibration.
	Pending int64 `json:"pending"`
	// Factor is the real growth per estimated token the session's responses
	// showed (see SetResponse); 0 means not learnt yet, counted as 1.
	Factor float64 `json:"factor,omitempty"`
	// Prefix is the estimate of the request's system prompt and tool
	// schemas, when the client named them; counted only before usage (a
	// response's usage includes them).
	Prefix int64 `json:"prefix,omitempty"`
}

// factor is Factor with 0 read as 1.
func (t Tally) factor() float64 {
	if t.Factor <= 0 {
		return 1
	}
	return t.Factor
}

// Scaled is the pending estimate times the calibration factor, rounded up.
func (t Tally) Scaled() int64 {
	return int64(math.Ceil(float64(t.Pending)*t.factor() - 1e-9))
}

// Count is the session's current token count.
func (t Tally) Count() int64 {
	switch {
	case t.HasUsage:
		return t.Baseline + t.Scaled()
	case t.Prefix > 0:
		return t.Prefix + t.Scaled()
	}
	return ceilDiv(t.Scaled()*4, 3)
}

// Add counts a message added after the last response, by its estimate.
func (t *Tally) Add(estimate int64) {
	t.Pending += estimate
}

// SetResponse makes a response the new baseline: its usage's input side plus
// ResponseOutput. Everything pending before it is inside that input side, so
// the input side's growth over the count's known part (the last baseline, or
// the prefix before any usage) against the pending estimate is what an
// estimated token really cost: that ratio moves the factor towards it (see
// Calibrate), when at least CalibrateMin was pending.
func (t *Tally) SetResponse(u turn.Usage, content turn.Content) {
	t.Observe(u, content, true)
}

// Observe is SetResponse, calibrating only when calibrate is set: a caller
// that counted some pending content by something other than what the
// request carried (an offloaded tool result, counted by its preview) would
// teach the factor the difference.
func (t *Tally) Observe(u turn.Usage, content turn.Content, calibrate bool) {
	known, ok := t.Baseline, t.HasUsage
	if !ok && t.Prefix > 0 {
		known, ok = t.Prefix, true
	}
	if calibrate && ok && t.Pending >= CalibrateMin {
		if growth := u.InputSide() - known; growth > 0 {
			t.Factor = Calibrate(t.Factor, float64(growth)/float64(t.Pending), t.Pending)
		}
	}
	t.Baseline = u.InputSide() + ResponseOutput(u, content)
	t.Pending = 0
	t.HasUsage = true
}

// Calibrate folds one ratio, observed on a pending estimate of pending
// tokens, into a factor (0: none yet): the first ratio is taken as it is;
// a later one moves the factor by the weight pending/(pending+2000), so
// a growth of 2,000 estimated tokens moves it halfway and one of 50,000
// nearly all the way. The ratio is bounded to MinFactor..MaxFactor first.
func Calibrate(factor, ratio float64, pending int64) float64 {
	ratio = min(max(ratio, MinFactor), MaxFactor)
	if factor <= 0 {
		return ratio
	}
	w := float64(pending) / (float64(pending) + calibrateScale)
	return factor + w*(ratio-factor)
}

// Reset starts over at a compaction boundary: no usage, nothing pending.
// The factor (a property of the session's content, not of its history) and
// the prefix (the client's request, unchanged by a compaction) stay.
func (t *Tally) Reset() {
	*t = Tally{Factor: t.Factor, Prefix: t.Prefix}
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

// SetPrefix takes the estimate of the request's system prompt and tools.
// After a usage the baseline holds the prefix it was measured with: a known
// prefix that changed moves the baseline by the difference (a tool added
// mid-session), an unknown one (0) is taken as it is.
func (t *Tally) SetPrefix(n int64) {
	if t.HasUsage && t.Prefix > 0 {
		t.Baseline = max(t.Baseline+n-t.Prefix, 0)
	}
	t.Prefix = n
}

// Restart counts a context whose usage no longer applies (another model's
// tokenizer measured it) as an estimate: no usage, the estimate pending, no
// factor (it was learnt on the old model's counts); the prefix stays.
func (t *Tally) Restart(estimate int64) {
	*t = Tally{Prefix: t.Prefix, Pending: estimate}
}
