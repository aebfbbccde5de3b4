package benchmark

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ScaleStep is what the scale run measured with a number of sessions and
// messages stored: Options.Rounds saturated ingest rounds and ScaleSamples
// context reads of a 10K-token session.
type ScaleStep struct {
	Sessions, Messages int64
	// Ingest are the step's rounds, in the order they ran. One round's
	// rate spreads by half either way on a busy 2-core machine; the step
	// counts for the median (Rate).
	Ingest  []Ingest
	Context []time.Duration
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
		step := ScaleStep{Sessions: sessions, Fill: fill}
		for r := range o.Rounds {
			turns, err := s.Encode(Events(fmt.Sprintf("%s-scale%d-%d", o.Run, i, r), o.Sessions, o.PerSession))
			if err != nil {
				return err
			}
			o.Progress("scale: %d sessions stored; ingest round %d of %d: %d turns, %d publishers", sessions, r+1, o.Rounds, turns.Len(), o.Publishers)
			in, err := s.IngestBurst(ctx, turns, o.Publishers)
			if err != nil {
				return err
			}
			o.Progress("scale: %.0f turns/s", in.Rate)
			step.Ingest = append(step.Ingest, in)
		}
		o.Progress("scale: median %.0f turns/s; context: %d samples of the %d-token session", step.Rate(), o.ScaleSamples, scaleContextTokens)
		lat, err := s.ContextLatency(ctx, id, o.ScaleSamples)
		if err != nil {
			return err
		}
		var messages int64
		if err := s.Owner.QueryRow(ctx, "SELECT count(*) FROM messages").Scan(&messages); err != nil {
			return fmt.Errorf("benchmark: count messages: %w", err)
		}
		step.Messages, step.Context = messages, lat
		rep.Scale = append(rep.Scale, step)
	}
	return nil
}

// Rate is the median of the step's ingest rounds, turns a second.
func (st ScaleStep) Rate() float64 { return Median(st.Rates()) }

// Rates are the step's ingest rounds' rates, in the order they ran.
func (st ScaleStep) Rates() []float64 { return rates(st.Ingest) }

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
	per, turns := int64(o.ScaleMessages), int64(o.ScaleMessages)/2
	hash := sha256.Sum256([]byte("fill"))
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	id := func(n int64) string { return fmt.Sprintf("fill-%06d", n) }
	for lo := from; lo < to; lo += chunk {
		hi := min(lo+chunk, to)
		err := copyRows(ctx, s, "sessions",
			[]string{"tenant_id", "session_id", "agent_id", "model", "applied_seq", "message_count", "message_bytes", "created_at", "updated_at"},
			hi-lo, func(i int64) []any {
				return []any{Tenant, id(lo + i), "main", "claude-sonnet-4-5", turns, per, per * messageBytes, at, at}
			})
		if err != nil {
			return err
		}
		err = copyRows(ctx, s, "messages",
			[]string{"tenant_id", "session_id", "uuid", "position", "seq", "role", "content", "content_hash", "estimate_tokens", "bytes_through"},
			(hi-lo)*per, func(i int64) []any {
				n, p := lo+i/per, i%per
				role, text := "user", fmt.Sprintf("Step %d of session %d: carry on with the migration and report back.", p/2, n)
				if p%2 == 1 {
					role, text = "assistant", fmt.Sprintf("Done with step %d; the tests pass.", p/2)
				}
				return []any{Tenant, id(n), fmt.Sprintf("%s-m%d", id(n), p), p, p/2 + 1, role,
					`[{"type":"text","text":"` + text + `"}]`, hash[:], int64(len(text) / 4), (p + 1) * messageBytes}
			})
		if err != nil {
			return err
		}
		err = copyRows(ctx, s, "turns", []string{"tenant_id", "session_id", "event_id", "seq", "status", "applied_at"},
			(hi-lo)*turns, func(i int64) []any {
				n, q := lo+i/turns, i%turns+1
				return []any{Tenant, id(n), fmt.Sprintf("%s-e%d", id(n), q), q, "applied", at}
			})
		if err != nil {
			return err
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

// copyRows copies n rows into table with COPY, as the schema's owner: row
// makes the i-th.
func copyRows(ctx context.Context, s *System, table string, columns []string, n int64, row func(i int64) []any) error {
	i := int64(0)
	_, err := s.Owner.CopyFrom(ctx, pgx.Identifier{table}, columns, pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		i++
		return row(i - 1), nil
	}))
	if err != nil {
		return fmt.Errorf("benchmark: fill %s: %w", table, err)
	}
	return nil
}
