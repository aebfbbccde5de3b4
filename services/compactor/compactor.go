// Package compactor is the compactor target: compaction. Its work is not built
// yet, so the target starts, reports healthy and stays idle.
package compactor

import (
	"log/slog"

	"github.com/mnemos-ai/mnemos/pkg/idle"
)

// New returns the target's run loop.
func New(log *slog.Logger) *idle.Service {
	return idle.New("compactor", "compaction", log)
}
