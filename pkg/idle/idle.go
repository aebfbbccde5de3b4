// Package idle is the placeholder run loop of a target whose service has not
// been built yet: it starts, reports healthy, and does no work.
package idle

import (
	"context"
	"log/slog"
)

// Service is a target that waits for shutdown.
type Service struct {
	name, work string
	log        *slog.Logger
}

// New names the target and the work it will do.
func New(name, work string, log *slog.Logger) *Service {
	return &Service{name: name, work: work, log: log}
}

// Status is what health endpoints report for the target.
func (s *Service) Status() string { return "idle" }

// Run blocks until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("target is idle: its work is not built yet", "target", s.name, "work", s.work)
	<-ctx.Done()
	return nil
}
