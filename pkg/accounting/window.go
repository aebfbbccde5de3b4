package accounting

import (
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// CheckWindow refuses a turn event whose context_window or
// max_output_tokens would leave the tenant's thresholds at zero or below:
// every count would be "blocking" and every turn would ask for a compaction.
// The gateway and the accountant both ask it, so an event published straight
// to NATS meets the same rule.
func CheckWindow(cfg tokens.Config, ev turn.Event) *turn.InputError {
	werr := cfg.CheckWindow(ev.Model, ev.ContextWindow, ev.MaxOutputTokens)
	if werr == nil {
		return nil
	}
	reason := turn.ReasonBadContextWindow
	if werr.Field == "max_output_tokens" {
		reason = turn.ReasonBadMaxOutputTokens
	}
	return turn.Refuse(reason, "%s", werr.Error())
}
