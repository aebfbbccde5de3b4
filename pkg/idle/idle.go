// Package idle is the placeholder run loop of a target whose service has not
// been built yet: it starts, reports healthy, and does no work.
package idle

import (
	"context"
	"log/slog"
)

// Service is a target that waits for shutdown.
type Service struct {
	name, arrives string
	log           *slog.Logger
}

// New names the target and what will give it work.
func New(name, arrives string, log *slog.Logger) *Service {
	return &Service{name: name, arrives: arrives, log: log}
}

// Status is what health endpoints report for the target.
func (s *Service) Status() string { return "idle" }

// Run blocks until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("target is idle: it consumes nothing yet", "target", s.name, "work_arrives_with", s.arrives)
	<-ctx.Done()
	return nil
}
