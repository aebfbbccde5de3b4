// Package demo is `mnemos demo` (and `make demo`): the README's five-minute
// tour, run against a Mnemos server over its HTTP API. It replays a sample
// Claude Code session, replays the long one until Mnemos compacts it, has a
// session ask to remember a fact, recalls the fact in a later session, and
// consolidates the scope in a dream, printing what each step shows and
// failing with the reason when a step does not get there.
package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/replay"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Config says which server to tour and how.
type Config struct {
	// URL is the server's base URL; APIKey names the tenant.
	URL    string
	APIKey string
	// Transcripts is the directory of the sample transcripts
	// (testdata/claude-code): tool_heavy.jsonl and long.jsonl.
	Transcripts string
	// Run names this run: the ids of its sessions and its scope end with it,
	// so a demo can run again against the same server. "" picks one.
	Run string
	// StepTimeout bounds the wait of each step (3 minutes when 0); Poll is
	// how often a waiting step looks again (250 ms when 0).
	StepTimeout time.Duration
	Poll        time.Duration
	// Client sends the requests; nil means a client with a 2-minute timeout.
	Client *http.Client
}

// The facts the tour remembers and asks about.
const (
	Fact     = "Remember that releases of this project go out on Tuesdays after the 10:00 stand-up."
	Question = "When do releases of this project go out?"
)

// Result is what each step of a run ended with.
type Result struct {
	Run string
	// Step 1: the replayed session and its token state.
	ToolSession string
	ToolTokens  Tokens
	// Step 2: the long session, its first compaction, its context's start.
	LongSession   string
	Compaction    Compaction
	ContextTokens int64
	ContextStart  string
	// Step 3: the scope and the memory extracted into it.
	Scope  string
	Memory Memory
	// Step 4: the later session and the reminder its context shows.
	RecallSession string
	Reminder      string
	// Step 5: the dream of the scope.
	Dream Dream
}

// Tokens is a session's token state.
type Tokens struct {
	Count       int64   `json:"count"`
	State       string  `json:"state"`
	PercentLeft float64 `json:"percent_left"`
	AutoCompact int64   `json:"autocompact_threshold"`
}

// Compaction is one compaction of a session.
type Compaction struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Method     string `json:"method"`
	PreTokens  int64  `json:"pre_tokens"`
	PostTokens int64  `json:"post_tokens"`
	LLMCalls   int    `json:"llm_calls"`
}

// Memory is one memory of a scope, as listed.
type Memory struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description"`
}

// Dream is one consolidation of a scope.
type Dream struct {
	ID          string   `json:"id"`
	Status      string   `json:"status"`
	LLMProvider string   `json:"llm_provider"`
	Summary     string   `json:"summary"`
	Error       string   `json:"error"`
	Written     []string `json:"written"`
	Deleted     []string `json:"deleted"`
}

// tour is one run in progress.
type tour struct {
	cfg Config
	out io.Writer
	res Result
}

// Run tours the server, writing what it sees to out, and returns what each
// step ended with; an error names the step that did not get there.
func Run(ctx context.Context, cfg Config, out io.Writer) (Result, error) {
	if cfg.URL == "" || cfg.APIKey == "" {
		return Result{}, errors.New("demo: a server URL and an API key are required")
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	if cfg.Run == "" {
		b := make([]byte, 3)
		_, _ = rand.Read(b) // never fails
		cfg.Run = hex.EncodeToString(b)
	}
	if !turn.ValidToken("demo-" + cfg.Run) {
		return Result{}, fmt.Errorf("demo: run %q: want letters, digits, '_' and '-'", cfg.Run)
	}
	if cfg.StepTimeout <= 0 {
		cfg.StepTimeout = 3 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 2 * time.Minute}
	}
	t := &tour{cfg: cfg, out: out, res: Result{Run: cfg.Run}}
	if err := t.ready(ctx); err != nil {
		return t.res, err
	}
	steps := []struct {
		title string
		run   func(context.Context) error
	}{
		{"1. Replay a session", t.replaySession},
		{"2. Watch it compact", t.compact},
		{"3. Remember a fact", t.remember},
		{"4. Recall it in a later session", t.recall},
		{"5. Dream", t.dream},
	}
	for _, s := range steps {
		fmt.Fprintf(out, "\n== %s\n", s.title)
		if err := s.run(ctx); err != nil {
			return t.res, fmt.Errorf("demo: %s: %w", s.title, err)
		}
	}
	fmt.Fprintf(out, "\nDone: sessions %s, %s, %s and %s (GET /v1/sessions lists them, newest first), scope %s (GET /v1/scopes).\n",
		t.res.ToolSession, t.res.LongSession, t.id("first"), t.res.RecallSession, t.res.Scope)
	return t.res, nil
}

func (t *tour) printf(format string, args ...any) { fmt.Fprintf(t.out, format, args...) }

func (t *tour) id(what string) string { return "demo-" + t.cfg.Run + "-" + what }

// ready checks that the server answers and takes the key.
func (t *tour) ready(ctx context.Context) error {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := t.get(ctx, "/v1/sessions?limit=1", &list); err != nil {
		return fmt.Errorf("demo: %s does not answer as Mnemos (start it with `make run`): %w", t.cfg.URL, err)
	}
	t.printf("Touring %s (run %s): sessions demo-%s-*, scope project:demo-%s\n", t.cfg.URL, t.cfg.Run, t.cfg.Run, t.cfg.Run)
	return nil
}

// replaySession replays tool_heavy.jsonl and shows its token state.
func (t *tour) replaySession(ctx context.Context) error {
	t.res.ToolSession = t.id("tour")
	last, err := t.replay(ctx, "tool_heavy.jsonl", replay.Options{Session: t.res.ToolSession}, false, 1)
	if err != nil {
		return err
	}
	var s struct {
		Tokens Tokens `json:"tokens"`
	}
	if err := t.until(ctx, fmt.Sprintf("session %s accounted through seq %d", t.res.ToolSession, last), func() (bool, error) {
		return t.applied(ctx, t.res.ToolSession, last, &s)
	}); err != nil {
		return err
	}
	t.res.ToolTokens = s.Tokens
	t.printf("GET /v1/sessions/%s: %d tokens, state %s, %.1f%% of the way to auto-compaction (%d) left\n",
		t.res.ToolSession, s.Tokens.Count, s.Tokens.State, s.Tokens.PercentLeft, s.Tokens.AutoCompact)
	return nil
}

// compact replays long.jsonl twice (each copy up to the client's own
// compaction) and waits for Mnemos to compact the session.
func (t *tour) compact(ctx context.Context) error {
	t.res.LongSession = t.id("long")
	last, err := t.replay(ctx, "long.jsonl", replay.Options{Session: t.res.LongSession}, true, 2)
	if err != nil {
		return err
	}
	var list struct {
		Compactions []Compaction `json:"compactions"`
	}
	if err := t.until(ctx, "the long session's first compaction to end", func() (bool, error) {
		var s struct {
			AppliedSeq         int64 `json:"applied_seq"`
			CompactionInFlight bool  `json:"compaction_in_flight"`
		}
		if ok, err := t.applied(ctx, t.res.LongSession, last, &s); !ok || err != nil {
			return false, err
		}
		if err := t.get(ctx, "/v1/sessions/"+t.res.LongSession+"/compactions", &list); err != nil {
			return false, err
		}
		ended := len(list.Compactions) > 0 && !slices.Contains([]string{"requested", "running"}, list.Compactions[0].Status)
		return ended && !s.CompactionInFlight, nil
	}); err != nil {
		return err
	}
	c := list.Compactions[0]
	t.res.Compaction = c
	if c.Status != "completed" {
		return fmt.Errorf("the compaction ended %s", c.Status)
	}
	t.printf("GET /v1/sessions/%s/compactions: %s by %s, %d → %d tokens, %d model calls\n",
		t.res.LongSession, c.Status, c.Method, c.PreTokens, c.PostTokens, c.LLMCalls)
	var notes struct {
		Version int64  `json:"version"`
		Content string `json:"content"`
	}
	if err := t.get(ctx, "/v1/sessions/"+t.res.LongSession+"/notes", &notes); err == nil {
		t.printf("GET …/notes: version %d, %d lines, kept by the session-memory service all along\n", notes.Version, strings.Count(notes.Content, "\n"))
	}
	var cx struct {
		ContextTokens int64 `json:"context_tokens"`
		Messages      []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := t.get(ctx, "/v1/sessions/"+t.res.LongSession+"/context", &cx); err != nil {
		return err
	}
	if len(cx.Messages) == 0 || len(cx.Messages[0].Content) == 0 {
		return errors.New("the context is empty")
	}
	t.res.ContextTokens, t.res.ContextStart = cx.ContextTokens, cx.Messages[0].Content[0].Text
	if !strings.HasPrefix(t.res.ContextStart, "<mnemos:compact-boundary") {
		return fmt.Errorf("the context does not start with the compaction boundary: %.120q", t.res.ContextStart)
	}
	t.printf("GET …/context: %d tokens, starting with %s\n", cx.ContextTokens, firstLine(t.res.ContextStart))
	return nil
}

// remember sends a user turn that asks to remember a fact and waits for
// the extractor to save it in the session's project scope.
func (t *tour) remember(ctx context.Context) error {
	t.res.Scope = "project:demo-" + t.cfg.Run
	session := t.id("first")
	if err := t.turn(ctx, session, Fact); err != nil {
		return err
	}
	t.printf("POST /v1/turns (session %s, memory_scope %s): %q\n", session, t.res.Scope, Fact)
	var list struct {
		Memories []Memory `json:"memories"`
	}
	if err := t.until(ctx, "a memory in "+t.res.Scope, func() (bool, error) {
		err := t.get(ctx, "/v1/scopes/"+t.res.Scope+"/memories", &list)
		return err == nil && len(list.Memories) > 0, err
	}); err != nil {
		return fmt.Errorf("%w (is the extractor running?)", err)
	}
	t.res.Memory = list.Memories[0]
	t.printf("GET /v1/scopes/%s/memories: %s (%s) — %s\n", t.res.Scope, t.res.Memory.Name, t.res.Memory.Type, t.res.Memory.Description)
	return nil
}

// recall asks about the fact in a new session of the scope and shows the
// reminder its context holds beside the question.
func (t *tour) recall(ctx context.Context) error {
	t.res.RecallSession = t.id("second")
	if err := t.turn(ctx, t.res.RecallSession, Question); err != nil {
		return err
	}
	t.printf("POST /v1/turns (session %s, same scope): %q\n", t.res.RecallSession, Question)
	if err := t.until(ctx, "session "+t.res.RecallSession+" accounted", func() (bool, error) {
		return t.applied(ctx, t.res.RecallSession, 1, nil)
	}); err != nil {
		return err
	}
	var cx struct {
		Messages []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := t.get(ctx, "/v1/sessions/"+t.res.RecallSession+"/context", &cx); err != nil {
		return err
	}
	for _, m := range cx.Messages {
		for _, b := range m.Content {
			if strings.Contains(b.Text, "<system-reminder>") && strings.Contains(b.Text, t.res.Memory.Name) {
				t.res.Reminder = b.Text
			}
		}
	}
	if t.res.Reminder == "" {
		return fmt.Errorf("the context shows no reminder of %s beside the question (the recall prefetch may have been slower than the context's wait)", t.res.Memory.Name)
	}
	t.printf("GET /v1/sessions/%s/context, beside the question:\n%s\n", t.res.RecallSession, indent(t.res.Reminder, 8))
	return nil
}

// dream starts a consolidation of the scope and waits for it to end.
func (t *tour) dream(ctx context.Context) error {
	var d Dream
	status, err := t.call(ctx, http.MethodPost, "/v1/scopes/"+t.res.Scope+"/dream", nil, &d)
	if err != nil {
		return err
	}
	if status != http.StatusAccepted {
		return fmt.Errorf("POST …/dream answered %d", status)
	}
	t.printf("POST /v1/scopes/%s/dream: dream %s %s\n", t.res.Scope, d.ID, d.Status)
	if err := t.until(ctx, "dream "+d.ID+" to end", func() (bool, error) {
		err := t.get(ctx, "/v1/dreams/"+d.ID, &d)
		return err == nil && slices.Contains([]string{"completed", "failed", "killed", "proposed"}, d.Status), err
	}); err != nil {
		return err
	}
	t.res.Dream = d
	t.printf("GET /v1/dreams/%s: %s (provider %s), %d written, %d deleted\n", d.ID, d.Status, d.LLMProvider, len(d.Written), len(d.Deleted))
	if d.Summary != "" {
		t.printf("%s\n", indent(d.Summary, 8))
	}
	if d.Status != "completed" && d.Status != "proposed" {
		return fmt.Errorf("the dream ended %s: %s", d.Status, d.Error)
	}
	return nil
}

// replay sends a sample transcript (cut at its own compaction and repeated
// when asked) and returns the last seq of its main session.
func (t *tour) replay(ctx context.Context, name string, opts replay.Options, untilCompact bool, repeat int) (int64, error) {
	path := filepath.Join(t.cfg.Transcripts, name)
	f, err := os.Open(path) //nolint:gosec // the sample transcripts' directory is the operator's, from the command line
	if err != nil {
		return 0, fmt.Errorf("%w (run from the repository, or point -transcripts at testdata/claude-code)", err)
	}
	defer f.Close()
	records, err := claudecode.Parse(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if untilCompact {
		records = replay.UntilCompaction(records)
	}
	events := replay.Events(replay.Repeat(records, repeat), opts)
	stats, err := replay.Send(ctx, events, replay.SendOptions{URL: t.cfg.URL, APIKey: t.cfg.APIKey, Client: t.cfg.Client})
	if err != nil {
		return 0, err
	}
	var last int64
	for _, ev := range events {
		if ev.SessionID == opts.Session {
			last = ev.Seq
		}
	}
	how := ""
	if repeat > 1 {
		how = fmt.Sprintf(", %d times", repeat)
	}
	if untilCompact {
		how += " up to its own /compact"
	}
	t.printf("mnemos replay %s%s → session %s: %d turn events sent\n", name, how, opts.Session, stats.Sent)
	return last, nil
}

// turn sends one user turn of session with text, in the demo's scope, as
// one model call that ends the turn.
func (t *tour) turn(ctx context.Context, session, text string) error {
	_, id, _ := strings.Cut(t.res.Scope, ":")
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: uuid.NewString(), SessionID: session, Seq: 1,
		MemoryScope: map[string]string{"project": id}, Model: "claude-sonnet-4-5",
		InputMessages: []turn.Message{{UUID: uuid.NewString(), Role: "user", Content: turn.Content{{Type: "text", Text: text}}}},
		Response: &turn.Message{UUID: uuid.NewString(), Role: "assistant", StopReason: "end_turn",
			Content: turn.Content{{Type: "text", Text: "Noted."}}},
		Usage:      &turn.Usage{InputTokens: 120, OutputTokens: 3},
		OccurredAt: time.Now().UTC(),
	}
	_, err := replay.Send(ctx, []turn.Event{ev}, replay.SendOptions{URL: t.cfg.URL, APIKey: t.cfg.APIKey, Client: t.cfg.Client})
	return err
}

// applied reports whether session has applied seq; into, when not nil,
// receives the session.
func (t *tour) applied(ctx context.Context, session string, seq int64, into any) (bool, error) {
	var raw json.RawMessage
	status, err := t.call(ctx, http.MethodGet, "/v1/sessions/"+session, nil, &raw)
	if status == http.StatusNotFound {
		return false, nil // not accounted yet
	}
	if err != nil {
		return false, err
	}
	var s struct {
		AppliedSeq int64 `json:"applied_seq"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return false, err
	}
	if into != nil {
		if err := json.Unmarshal(raw, into); err != nil {
			return false, err
		}
	}
	return s.AppliedSeq >= seq, nil
}

// until polls done until it reports true, fails, or the step's time is up.
func (t *tour) until(ctx context.Context, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(t.cfg.StepTimeout)
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s", t.cfg.StepTimeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(t.cfg.Poll):
		}
	}
}

func (t *tour) get(ctx context.Context, path string, out any) error {
	status, err := t.call(ctx, http.MethodGet, path, nil, out)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET %s answered %d", path, status)
	}
	return err
}

// call sends one request and decodes a 2xx answer into out; an error answer
// is an error naming its code and message, with its status.
func (t *tour) call(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, t.cfg.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+t.cfg.APIKey)
	resp, err := t.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
			return resp.StatusCode, fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if len(line) > 120 {
		line = line[:120] + "…"
	}
	return line
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}
