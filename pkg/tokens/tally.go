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
	// before calibration; PendingDense the part of it that is code, tool
	// output, JSON or base64 (see EstimateSplit), the rest is prose.
	Pending      int64 `json:"pending"`
	PendingDense int64 `json:"pending_dense,omitempty"`
	// Factor and DenseFactor are the real growth per estimated token of
	// prose and of dense content the session's responses showed (see
	// Observe); 0 means not learnt yet, counted as 1. Two factors, since a
	// tokenizer's rate differs between them more than between sessions.
	Factor      float64 `json:"factor,omitempty"`
	DenseFactor float64 `json:"dense_factor,omitempty"`
	// Prefix is the estimate of the request's system prompt and tool
	// schemas, when the client named them; counted only before usage (a
	// response's usage includes them).
	Prefix int64 `json:"prefix,omitempty"`
}

// or1 is a factor with 0 (not learnt) read as 1.
func or1(f float64) float64 {
	if f <= 0 {
		return 1
	}
	return f
}

// parts splits the pending estimate into its prose and dense parts.
func (t Tally) parts() (prose, dense int64) {
	dense = min(max(t.PendingDense, 0), t.Pending)
	return t.Pending - dense, dense
}

// factors are the factors in use: one not learnt yet borrows the other
// (what skews the session's counts, the client's framing or the
// tokenizer, skews both), and is 1 when neither is.
func (t Tally) factors() (prose, dense float64) {
	prose, dense = t.Factor, t.DenseFactor
	if prose <= 0 {
		prose = dense
	}
	if dense <= 0 {
		dense = prose
	}
	return or1(prose), or1(dense)
}

// Scaled is the pending estimate, each part times its factor, rounded up.
func (t Tally) Scaled() int64 {
	prose, dense := t.parts()
	fp, fd := t.factors()
	return int64(math.Ceil(float64(prose)*fp + float64(dense)*fd - 1e-9))
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

// Add counts prose added after the last response, by its estimate.
func (t *Tally) Add(estimate int64) {
	t.Pending += estimate
}

// AddMessage counts a message added after the last response, by its
// estimate, split by kind.
func (t *Tally) AddMessage(m turn.Message) {
	t.AddSplit(EstimateSplit(m.Content))
}

// AddSplit counts content added after the last response by a count and its
// dense part: a Counter's (t.AddSplit(c.Content(m.Content))), for a model
// whose tokenizer counts exactly. The count rule stays the same: the last
// usage plus what came after it, calibrated.
func (t *Tally) AddSplit(total, dense int64) {
	t.Pending += total
	t.PendingDense += dense
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
			t.calibrate(float64(growth))
		}
	}
	t.Baseline = u.InputSide() + ResponseOutput(u, content)
	t.Pending, t.PendingDense = 0, 0
	t.HasUsage = true
}

// calibrate moves each factor by its part's share of the prediction: the
// ratio of the real growth to the predicted one, applied to a factor, is
// its target; a factor not learnt yet moves from the one it borrowed to its
// target in proportion to its share, a learnt one by that share times pending/(pending+2000), so a
// growth of 2,000 estimated tokens moves it halfway and one of 50,000 nearly
// all the way. Targets are bounded to MinFactor..MaxFactor. A growth of one
// kind alone moves that kind's factor alone.
func (t *Tally) calibrate(growth float64) {
	prose, dense := t.parts()
	fp, fd := t.factors()
	predicted := float64(prose)*fp + float64(dense)*fd
	if predicted <= 0 {
		return
	}
	r := growth / predicted
	w := float64(t.Pending) / (float64(t.Pending) + calibrateScale)
	move := func(f *float64, cur float64, part int64) {
		if part <= 0 {
			return
		}
		share := float64(part) * cur / predicted
		target := min(max(cur*r, MinFactor), MaxFactor)
		if *f <= 0 {
			*f = cur + share*(target-cur)
			return
		}
		*f = cur + share*w*(target-cur)
	}
	move(&t.Factor, fp, prose)
	move(&t.DenseFactor, fd, dense)
}

// Reset starts over at a compaction boundary: no usage, nothing pending.
// The factor (a property of the session's content, not of its history) and
// the prefix (the client's request, unchanged by a compaction) stay.
func (t *Tally) Reset() {
	*t = Tally{Factor: t.Factor, DenseFactor: t.DenseFactor, Prefix: t.Prefix}
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
// tokenizer measured it) as an estimate: no usage, the estimate pending (as
// prose: its split is not kept), no factors (learnt on the old model's
// counts); the prefix stays.
func (t *Tally) Restart(estimate int64) {
	*t = Tally{Prefix: t.Prefix, Pending: estimate}
}
