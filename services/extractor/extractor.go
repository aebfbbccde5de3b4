// Package extractor is the extractor target: long-term memory extraction. Its work is not built
// yet, so the target starts, reports healthy and stays idle.
package extractor

import (
	"log/slog"

	"github.com/mnemos-ai/mnemos/pkg/idle"
)

// New returns the target's run loop.
func New(log *slog.Logger) *idle.Service {
	return idle.New("extractor", "long-term memory extraction", log)
}
