package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Streams declared by EnsureStreams, by their unprefixed names.
const (
	// StreamTurns holds turn.completed events from the agent backends.
	StreamTurns = "TURNS"
	// StreamEvents holds the events services publish for each other.
	StreamEvents = "EVENTS"
	// StreamDeadLetter holds messages no consumer could process.
	StreamDeadLetter = "DEADLETTER"
)

// DefaultDuplicateWindow is how long the server remembers message ids
// unless Config.DuplicateWindow says otherwise.
const DefaultDuplicateWindow = 2 * time.Minute

// streamSpec is a stream as declared in code, without namespace.
type streamSpec struct {
	name     string
	subjects []string
	maxAge   time.Duration
}

// streamSpecs lists the streams Mnemos needs. They only use features of
// nats-server 2.9, the oldest server Mnemos supports.
func streamSpecs() []streamSpec {
	const week = 7 * 24 * time.Hour
	return []streamSpec{
		{name: StreamTurns, subjects: []string{"turn.completed.>"}, maxAge: week},
		{name: StreamEvents, subjects: []string{
			"turn.accounted.>",
			"context.threshold.>",
			"compact.>",
			"session_memory.updated.>",
			"memory.saved.>",
			"dream.>",
		}, maxAge: week},
		{name: StreamDeadLetter, subjects: []string{deadLetterPrefix + ">"}, maxAge: 30 * 24 * time.Hour},
	}
}

// EnsureStreams creates the streams Mnemos needs, or updates them to the
// configuration declared here. It is idempotent.
func (b *Bus) EnsureStreams(ctx context.Context) error {
	for _, spec := range streamSpecs() {
		subjects := make([]string, len(spec.subjects))
		for i, s := range spec.subjects {
			subjects[i] = b.prefix(s)
		}
		cfg := jetstream.StreamConfig{
			Name:       b.StreamName(spec.name),
			Subjects:   subjects,
			Retention:  jetstream.LimitsPolicy,
			Storage:    jetstream.FileStorage,
			MaxAge:     spec.maxAge,
			Duplicates: b.duplicateWindow,
			Replicas:   b.replicas,
		}
		if err := b.ensureStream(ctx, cfg); err != nil {
			return fmt.Errorf("bus.EnsureStreams: jetstream.CreateOrUpdateStream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// ensureStream creates or updates one stream. It tries again, with a
// growing pause, while the server fails on its side (5xx: no leader yet
// after a restart, a store it could not create at that moment) or does not
// answer (a cluster electing its leaders drops requests), each try with
// its own deadline, for at most jetStreamWait.
func (b *Bus) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) error {
	deadline := time.Now().Add(jetStreamWait)
	for attempt := 1; ; attempt++ {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := b.js.CreateOrUpdateStream(tctx, cfg)
		cancel()
		if err == nil || !transient(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		b.log.Warn("bus: the server could not create a stream; trying again", "stream", cfg.Name, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff(attempt, 100*time.Millisecond, 2*time.Second)):
		}
	}
}

// transient reports a JetStream failure that may pass: the server's own
// (5xx) or no answer in time.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code >= 500
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)
}

// maxKindTokens bounds the tokens of an event kind PurgeTenant reaches: the
// kinds are two ("turn.completed"), a dead letter adds one
// ("deadletter.turn.completed"), and one more leaves room.
const maxKindTokens = 4

// tenantFilters are the subject filters of every event of tenant, without
// namespace. An event's subject ends with its tenant and its session
// (ParseSubject), so in a subject of n tokens the tenant is token n-1: one
// filter per length of kind matches exactly the tenant's subjects of that
// length.
func tenantFilters(tenant string) []string {
	filters := make([]string, 0, maxKindTokens)
	for n := 1; n <= maxKindTokens; n++ {
		filters = append(filters, strings.Repeat("*.", n)+tenant+".*")
	}
	return filters
}

// PurgeTenant removes every message of tenant from the streams
// EnsureStreams declares: its turns, the events about it and its dead
// letters. Other tenants' messages stay. A stream that does not exist
// holds nothing to remove. Purging again removes what arrived since.
func (b *Bus) PurgeTenant(ctx context.Context, tenant string) error {
	if !ValidToken(tenant) {
		return fmt.Errorf("bus.PurgeTenant: %q is not a subject token", tenant)
	}
	for _, spec := range streamSpecs() {
		name := b.StreamName(spec.name)
		stream, err := b.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("bus.PurgeTenant: jetstream.Stream %s: %w", name, err)
		}
		for _, filter := range tenantFilters(tenant) {
			if err := stream.Purge(ctx, jetstream.WithPurgeSubject(b.prefix(filter))); err != nil {
				return fmt.Errorf("bus.PurgeTenant: purging %s of %s: %w", name, b.prefix(filter), err)
			}
		}
	}
	return nil
}
