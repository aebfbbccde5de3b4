// Package sessionmemory is the session-memory target: rolling session notes. Its work is not built
// yet, so the target starts, reports healthy and stays idle.
package sessionmemory

import (
	"log/slog"

	"github.com/mnemos-ai/mnemos/pkg/idle"
)

// New returns the target's run loop.
func New(log *slog.Logger) *idle.Service {
	return idle.New("session-memory", "rolling session notes", log)
}
