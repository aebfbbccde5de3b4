// Package sessionmemory is the sessionmemory target: rolling session notes (DESIGN §6). Its work has not been
// built yet, so the target starts, reports healthy and stays idle.
package sessionmemory

import (
	"log/slog"

	"github.com/mnemos-ai/mnemos/pkg/idle"
)

// New returns the target's run loop.
func New(log *slog.Logger) *idle.Service {
	return idle.New("sessionmemory", "rolling session notes (DESIGN §6)", log)
}
