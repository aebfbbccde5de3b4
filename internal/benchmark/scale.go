package benchmark

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ScaleStep is what the scale run measured with a number of sessions and
// messages stored: one saturated ingest round and ScaleSamples context
// reads of a 10K-token session.
type ScaleStep struct {
	Sessions, Messages int64
	Ingest             Ingest
	Context            []time.Duration
	// Fill is how long storing the step's sessions took (COPY, VACUUM and
	// CHECKPOINT).
	Fill time.Duration
}

// scaleContextTokens is the size of the session whose context the scale
// run reads.
const scaleContextTokens = 10_000

// runScale fills the tenant's tables in steps (Options.ScaleSessions, each
// session of ScaleMessages messages, half as many turns) and measures at
// each: whether ingest and context reads cost the same with the tables a
// hundred times fuller.
func runScale(ctx context.Context, s *System, o Options, built map[int64]string, rep *Report) error {
	stored := int64(0)
	for i, sessions := range o.ScaleSessions {
		start := time.Now()
		if err := fillSessions(ctx, s, o, stored, sessions); err != nil {
			return err
		}
		stored = sessions
		fill := time.Since(start)
		id, err := contextSession(ctx, s, o, built, scaleContextTokens)
		if err != nil {
			return err
		}
		evs := Events(fmt.Sprintf("%s-scale%d", o.Run, i), o.Sessions, o.PerSession)
		o.Progress("scale: %d sessions stored; ingest round of %d turns, %d publishers", sessions, len(evs), o.Publishers)
		in, err := s.IngestBurst(ctx, evs, o.Publishers)
		if err != nil {
			return err
		}
		o.Progress("scale: %.0f turns/s; context: %d samples of the %d-token session", in.Rate, o.ScaleSamples, scaleContextTokens)
		lat, err := s.ContextLatency(ctx, id, o.ScaleSamples)
		if err != nil {
			return err
		}
		var messages int64
		if err := s.Owner.QueryRow(ctx, "SELECT count(*) FROM messages").Scan(&messages); err != nil {
			return fmt.Errorf("benchmark: count messages: %w", err)
		}
		rep.Scale = append(rep.Scale, ScaleStep{Sessions: sessions, Messages: messages, Ingest: in, Context: lat, Fill: fill})
	}
	return nil
}

// messageBytes is the size a filled message counts for in its session's
// running totals (messages.bytes_through, sessions.message_bytes).
const messageBytes = 80

// fillSessions stores sessions from through to-1 of the benchmark tenant
// ("fill-000042"), as the schema's owner with COPY, a thousand sessions a
// statement: each session's row, its ScaleMessages messages (a user request
// and a short answer, alternately) and a turn per two messages; then
// VACUUM (ANALYZE) and CHECKPOINT.
func fillSessions(ctx context.Context, s *System, o Options, from, to int64) error {
	if to <= from {
		return nil
	}
	const chunk = 1_000
	per := int64(o.ScaleMessages)
	hash := sha256.Sum256([]byte("fill"))
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for lo := from; lo < to; lo += chunk {
		hi := min(lo+chunk, to)
		id := func(n int64) string { return fmt.Sprintf("fill-%06d", n) }
		n := lo
		_, err := s.Owner.CopyFrom(ctx, pgx.Identifier{"sessions"},
			[]string{"tenant_id", "session_id", "agent_id", "model", "applied_seq", "message_count", "message_bytes", "created_at", "updated_at"},
			pgx.CopyFromFunc(func() ([]any, error) {
				if n >= hi {
					return nil, nil
				}
				n++
				return []any{Tenant, id(n - 1), "main", "claude-sonnet-4-5", per / 2, per, per * messageBytes, at, at}, nil
			}))
		if err != nil {
			return fmt.Errorf("benchmark: fill sessions: %w", err)
		}
		n, p := lo, int64(0)
		_, err = s.Owner.CopyFrom(ctx, pgx.Identifier{"messages"},
			[]string{"tenant_id", "session_id", "uuid", "position", "seq", "role", "content", "content_hash", "estimate_tokens", "bytes_through"},
			pgx.CopyFromFunc(func() ([]any, error) {
				if p == per {
					n, p = n+1, 0
				}
				if n >= hi {
					return nil, nil
				}
				role, text := "user", fmt.Sprintf("Step %d of session %d: carry on with the migration and report back.", p/2, n)
				if p%2 == 1 {
					role, text = "assistant", fmt.Sprintf("Done with step %d; the tests pass.", p/2)
				}
				row := []any{Tenant, id(n), fmt.Sprintf("%s-m%d", id(n), p), p, p/2 + 1, role,
					`[{"type":"text","text":"` + text + `"}]`, hash[:], int64(len(text) / 4), (p + 1) * messageBytes}
				p++
				return row, nil
			}))
		if err != nil {
			return fmt.Errorf("benchmark: fill messages: %w", err)
		}
		n, q := lo, int64(0)
		_, err = s.Owner.CopyFrom(ctx, pgx.Identifier{"turns"},
			[]string{"tenant_id", "session_id", "event_id", "seq", "status", "applied_at"},
			pgx.CopyFromFunc(func() ([]any, error) {
				if q == per/2 {
					n, q = n+1, 0
				}
				if n >= hi {
					return nil, nil
				}
				q++
				return []any{Tenant, id(n), fmt.Sprintf("%s-e%d", id(n), q), q, "applied", at}, nil
			}))
		if err != nil {
			return fmt.Errorf("benchmark: fill turns: %w", err)
		}
		if hi%(10*chunk) == 0 || hi == to {
			o.Progress("scale: filled %d of %d sessions (%d messages each)", hi, to, per)
		}
	}
	// As a database that has been running looks: vacuumed (the visibility
	// map set, statistics fresh) and checkpointed, so the writes of the
	// fill are not still being flushed while the step is measured.
	if _, err := s.Owner.Exec(ctx, "VACUUM (ANALYZE) sessions, messages, turns"); err != nil {
		return fmt.Errorf("benchmark: vacuum: %w", err)
	}
	if _, err := s.Owner.Exec(ctx, "CHECKPOINT"); err != nil {
		o.Progress("scale: no checkpoint (%v); measuring anyway", err)
	}
	return nil
}
