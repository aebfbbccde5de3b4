// Package replay is the logic of `mnemos replay`: it turns a Claude Code
// transcript into turn events and either accounts them in-process (DryRun) or
// sends them to a Mnemos server (Send). cmd/mnemos only wires flags to it.
package replay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"reflect"

	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Options control how a transcript is replayed.
type Options struct {
	// Window and MaxOutput, when above 0, override the model table: they are
	// the context_window and max_output_tokens of every event.
	Window    int64
	MaxOutput int64
	// Session replaces the transcript's sessionId for main-agent records;
	// sub-agent records go to "<Session>-agent-<agentId>".
	Session string
	// Tenant is written as tenant_id on every event when set.
	Tenant string
	// MemoryScope is written as memory_scope on every event when set: the
	// scopes whose memories the session reads and extraction writes (see
	// AddScope). A transcript names none.
	MemoryScope map[string]string
	// Config holds the thresholds; the zero Config means tokens.DefaultConfig().
	Config tokens.Config
}

func (o Options) config() (tokens.Config, error) {
	if reflect.DeepEqual(o.Config, tokens.Config{}) { // Models makes Config incomparable with ==
		return tokens.DefaultConfig(), nil
	}
	if err := o.Config.Validate(); err != nil {
		return tokens.Config{}, fmt.Errorf("replay: token config: %w", err)
	}
	return o.Config, nil
}

// Events groups records into rounds and turns them into turn events.
func Events(records []claudecode.Record, opts Options) []turn.Event {
	rounds := claudecode.Group(records, claudecode.GroupOptions{Session: opts.Session})
	return claudecode.Events(rounds, claudecode.EventOptions{
		Tenant:          opts.Tenant,
		MemoryScope:     opts.MemoryScope,
		ContextWindow:   opts.Window,
		MaxOutputTokens: opts.MaxOutput,
	})
}

// Line is one line of the dry run: the accounting right after one record.
type Line struct {
	UUID string `json:"uuid"`
	// Type is "user", "assistant" or "compact_boundary".
	Type    string       `json:"type"`
	Session string       `json:"session"`
	Count   int64        `json:"count"`
	State   tokens.State `json:"state"`
	// Compact is the auto-compact decision before the next API call at this
	// point: the count reached the auto-compact threshold.
	Compact bool `json:"compact"`
}

// Account runs the token accounting over a transcript's records, in round
// order (a round's inputs, then its response's records), and returns one Line
// per user, assistant and compact_boundary record. Each session keeps a
// tokens.Tally: a user record (or an assistant record that is no API
// response) adds its estimate; a response record makes the response so far
// (its blocks up to and including this record, with this record's usage) the
// new baseline; a compact_boundary resets the tally.
func Account(records []claudecode.Record, opts Options) ([]Line, error) {
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	type session struct {
		tally tokens.Tally
		model string
	}
	var (
		sessions = map[string]*session{}
		out      = make([]Line, 0, len(records))
	)
	for _, r := range claudecode.Group(records, claudecode.GroupOptions{Session: opts.Session}) {
		s := sessions[r.Session]
		if s == nil {
			s = &session{}
			sessions[r.Session] = s
		}
		if r.Model != "" {
			s.model = r.Model
		}
		emit := func(uuid, kind, model string) {
			count := s.tally.Count()
			limits := cfg.Limits(model, opts.Window, opts.MaxOutput)
			out = append(out, Line{
				UUID: uuid, Type: kind, Session: r.Session, Count: count,
				State: limits.State(count), Compact: limits.AboveAutoCompact(count),
			})
		}

		for i := range r.Inputs {
			rec := &r.Inputs[i]
			s.tally.AddMessage(rec.Message)
			emit(rec.UUID, rec.Kind(), s.model)
		}
		var content turn.Content
		for i := range r.Response {
			rec := &r.Response[i]
			content = append(content, rec.Message.Content...)
			s.tally.SetResponse(*rec.Usage, content)
			emit(rec.UUID, rec.Kind(), rec.Model)
		}
		if b := r.Boundary; b != nil {
			s.tally.Reset()
			emit(b.UUID, b.Kind(), s.model)
		}
	}
	return out, nil
}

// DryRun accounts a transcript in-process, without a server, and writes one
// JSON object per line per Line (see Account).
func DryRun(w io.Writer, records []claudecode.Record, opts Options) error {
	lines, err := Account(records, opts)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range lines {
		if err := enc.Encode(&lines[i]); err != nil {
			return fmt.Errorf("replay: write dry run: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("replay: write dry run: %w", err)
	}
	return nil
}
