package memtools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// Binding is who the tools act as, where, and why: every change the
// executor makes is recorded with it.
type Binding struct {
	Tenant string
	// Scope is the one scope the tools reach.
	Scope memory.Scope
	// Actor, Reason, SourceTurns and SessionID make each change's
	// memory.Change. A delete call's own reason is added to Reason.
	Actor       memory.Actor
	Reason      string
	SourceTurns []string
	SessionID   string
}

// NoDeleteLimit lets an executor delete without limit.
const NoDeleteLimit = -1

// Options shape an executor.
type Options struct {
	// Tools are the tools offered, of AllTools (all of them when nil).
	Tools []string
	// MaxDeletes is how many deletions the executor performs; further
	// delete calls are not performed but recorded as Proposals, for
	// approval (the dreamer's guard). 0 performs none; NoDeleteLimit all.
	MaxDeletes int
	// ListLimit bounds how many memories memory_list shows (200 when 0).
	ListLimit int
	// Stage makes the executor stage its changes instead of making them:
	// writes, edits, deletions and index edits are checked as the store
	// would check them and kept, later calls see them, and Staged returns
	// them as one memory.Batch for the caller to apply (or not). MaxDeletes
	// does not apply then: the caller judges the whole.
	Stage bool
	// Extra are tools of the caller's own, offered after the memory tools.
	Extra []Tool
	// OnChange, when set, is called after each change made or staged
	// (name is "" for the index).
	OnChange func(ctx context.Context, op memory.Op, name memory.Name)
}

// Tool is a tool of the caller's own an executor offers beside the memory
// tools: its definition, and what runs a call of it. Run returns the
// model's mistakes as error Results; err only for failures of the system.
type Tool struct {
	Def llm.Tool
	Run func(ctx context.Context, input json.RawMessage) (Result, error)
}

// Result is a tool call's outcome: the tool_result text, and whether it is
// an error the model should see as one.
type Result struct {
	Text    string
	IsError bool
}

// Applied is one change the executor made.
type Applied struct {
	Op       memory.Op
	Name     memory.Name
	Revision int64
}

// Proposal is a deletion the executor did not perform because its
// deletions ran out: it awaits approval.
type Proposal struct {
	Name     memory.Name
	Revision int64
	Reason   string
}

// Executor runs tool calls against one scope's memories as one actor. It
// is safe for concurrent use.
type Executor struct {
	store *memory.Store
	b     Binding
	opts  Options

	mu           sync.Mutex
	applied      []Applied
	proposals    []Proposal
	deletes      int
	indexChanged bool
	stage        stage
}

// New returns an executor bound to b.
func New(st *memory.Store, b Binding, opts Options) (*Executor, error) {
	if b.Scope.IsZero() {
		return nil, errors.New("memtools.New: no scope")
	}
	if !b.Actor.Valid() {
		return nil, fmt.Errorf("memtools.New: actor %q", b.Actor)
	}
	if b.Actor == memory.ActorAgent && b.SessionID == "" {
		return nil, errors.New("memtools.New: the agent's changes name its session")
	}
	if opts.Tools == nil {
		opts.Tools = AllTools
	}
	for _, t := range opts.Tools {
		if _, ok := definitions[t]; !ok {
			return nil, fmt.Errorf("memtools.New: unknown tool %q", t)
		}
	}
	for _, t := range opts.Extra {
		if _, ok := definitions[t.Def.Name]; ok || t.Def.Name == "" || t.Run == nil {
			return nil, fmt.Errorf("memtools.New: extra tool %q: a name of its own and a Run", t.Def.Name)
		}
	}
	if opts.ListLimit <= 0 {
		opts.ListLimit = 200
	}
	return &Executor{store: st, b: b, opts: opts, stage: stage{memories: map[memory.Name]*stagedMemory{}}}, nil
}

// Tools returns the definitions of the tools offered, for llm.Request.Tools.
func (e *Executor) Tools(ctx context.Context) ([]llm.Tool, error) {
	l, err := e.store.Limits(ctx, e.b.Tenant)
	if err != nil {
		return nil, fmt.Errorf("memtools: limits: %w", err)
	}
	out := tools(e.opts.Tools, e.b.Scope.String(), l.IndexLineMaxChars)
	for _, t := range e.opts.Extra {
		out = append(out, t.Def)
	}
	return out, nil
}

// Applied returns the changes made so far, in order.
func (e *Executor) Applied() []Applied {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.applied)
}

// Written returns the names of the memories created, updated or restored,
// each once, in the order first written.
func (e *Executor) Written() []memory.Name {
	return e.names(func(op memory.Op) bool { return op != memory.OpDeleted })
}

// Deleted returns the names of the memories deleted.
func (e *Executor) Deleted() []memory.Name {
	return e.names(func(op memory.Op) bool { return op == memory.OpDeleted })
}

func (e *Executor) names(keep func(memory.Op) bool) []memory.Name {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []memory.Name
	for _, a := range e.applied {
		if keep(a.Op) && !slices.Contains(out, a.Name) {
			out = append(out, a.Name)
		}
	}
	return out
}

// Proposals returns the deletions proposed for approval.
func (e *Executor) Proposals() []Proposal {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.proposals)
}

// IndexChanged reports whether an index edit changed the index.
func (e *Executor) IndexChanged() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.indexChanged
}

// Run runs one tool call and returns its tool_result. Every failure the
// model can act on — bad input, a name outside the scope, a memory that
// does not exist, a refused write — is an error result; only a failure of
// the system itself (Postgres unreachable) is returned as err, and the
// call may be retried.
func (e *Executor) Run(ctx context.Context, call llm.ToolCall) (Result, error) {
	for _, t := range e.opts.Extra {
		if t.Def.Name == call.Name {
			return t.Run(ctx, call.Input)
		}
	}
	if !slices.Contains(e.opts.Tools, call.Name) {
		names := slices.Clone(e.opts.Tools)
		for _, t := range e.opts.Extra {
			names = append(names, t.Def.Name)
		}
		return e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "there is no tool %q here; the tools are %s", call.Name, strings.Join(names, ", ")))
	}
	switch call.Name {
	case ToolList:
		return e.list(ctx)
	case ToolRead:
		var in struct {
			Name string `json:"name"`
		}
		if r, ok := e.decode(ctx, call, &in, "name"); !ok {
			return r, nil
		}
		return e.read(ctx, in.Name)
	case ToolWrite:
		var in struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Type        string `json:"type"`
			Body        string `json:"body"`
		}
		if r, ok := e.decode(ctx, call, &in, "name", "description", "type", "body"); !ok {
			return r, nil
		}
		return e.write(ctx, in.Name, in.Description, in.Type, in.Body)
	case ToolEdit:
		var in struct {
			Name       string `json:"name"`
			OldString  string `json:"old_string"`
			NewString  string `json:"new_string"`
			ReplaceAll bool   `json:"replace_all"`
		}
		if r, ok := e.decode(ctx, call, &in, "name", "old_string", "new_string"); !ok {
			return r, nil
		}
		return e.edit(ctx, in.Name, in.OldString, in.NewString, in.ReplaceAll)
	case ToolDelete:
		var in struct {
			Name   string `json:"name"`
			Reason string `json:"reason"`
		}
		if r, ok := e.decode(ctx, call, &in, "name"); !ok {
			return r, nil
		}
		return e.delete(ctx, in.Name, in.Reason)
	case ToolIndexRead:
		return e.readIndex(ctx)
	default: // ToolIndexWrite
		var in struct {
			Content string `json:"content"`
		}
		if r, ok := e.decode(ctx, call, &in, "content"); !ok {
			return r, nil
		}
		return e.writeIndex(ctx, in.Content)
	}
}

// decode reads a call's input into v, checking that the required keys are
// present; a failure is the (counted) error result to return.
func (e *Executor) decode(ctx context.Context, call llm.ToolCall, v any, required ...string) (Result, bool) {
	input := bytes.TrimSpace(call.Input)
	if len(input) == 0 {
		input = []byte("{}")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(input, &keys); err != nil {
		r, _ := e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "the input of %s is not a JSON object: %v", call.Name, err))
		return r, false
	}
	for _, k := range required {
		if _, ok := keys[k]; !ok {
			r, _ := e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "%s needs %q (it takes %s)", call.Name, k, strings.Join(required, ", ")))
			return r, false
		}
	}
	if err := json.Unmarshal(input, v); err != nil {
		r, _ := e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "the input of %s: %v", call.Name, err))
		return r, false
	}
	return Result{}, true
}

// refused counts a refusal the executor made itself and turns it into an
// error result.
func (e *Executor) refused(ctx context.Context, err error) (Result, error) {
	return e.failed(e.store.Refused(ctx, e.b.Actor, err))
}

// failed turns the store's error into an error result; a failure of the
// system is returned as err.
func (e *Executor) failed(err error) (Result, error) {
	if errors.Is(err, memory.ErrNotFound) {
		return Result{Text: "Not found: " + err.Error(), IsError: true}, nil
	}
	if me, ok := memory.AsError(err); ok {
		return Result{Text: fmt.Sprintf("Refused (%s): %s", me.Reason, me.Detail), IsError: true}, nil
	}
	return Result{}, err
}

func (e *Executor) change(reason string) memory.Change {
	r := e.b.Reason
	switch {
	case reason == "":
	case r == "":
		r = reason
	default:
		r += ": " + reason
	}
	return memory.Change{Actor: e.b.Actor, Reason: r, SourceTurns: e.b.SourceTurns, SessionID: e.b.SessionID}
}

func (e *Executor) record(ctx context.Context, res memory.Result) {
	if !res.Changed() {
		return
	}
	e.mu.Lock()
	e.applied = append(e.applied, Applied{Op: res.Op, Name: res.Memory.Name, Revision: res.Memory.Revision})
	e.mu.Unlock()
	e.changed(ctx, res.Op, res.Memory.Name)
}

// changed tells the caller's OnChange of a change.
func (e *Executor) changed(ctx context.Context, op memory.Op, name memory.Name) {
	if e.opts.OnChange != nil {
		e.opts.OnChange(ctx, op, name)
	}
}

func (e *Executor) list(ctx context.Context) (Result, error) {
	if e.opts.Stage {
		return e.stagedList(ctx)
	}
	heads, err := e.store.Headers(ctx, e.b.Tenant, e.b.Scope, e.opts.ListLimit+1)
	if err != nil {
		return e.failed(err)
	}
	if len(heads) == 0 {
		return Result{Text: fmt.Sprintf("%s has no memories yet.", e.b.Scope)}, nil
	}
	var b strings.Builder
	shown := heads[:min(len(heads), e.opts.ListLimit)]
	fmt.Fprintf(&b, "%d memories of %s, most recently updated first:\n", len(shown), e.b.Scope)
	for _, h := range shown {
		b.WriteString(listLine(h))
	}
	if len(heads) > len(shown) {
		fmt.Fprintf(&b, "(older memories are not listed; only the %d most recent)\n", len(shown))
	}
	return Result{Text: strings.TrimSuffix(b.String(), "\n")}, nil
}

// parseName reads a name the model gave, refusing (and counting) one that
// is not a name of this scope.
func (e *Executor) parseName(ctx context.Context, s string) (memory.Name, *Result, error) {
	n, err := memory.ParseRef(strings.TrimSpace(s))
	if err != nil {
		r, err := e.refused(ctx, err)
		return "", &r, err
	}
	return n, nil, nil
}

func (e *Executor) read(ctx context.Context, name string) (Result, error) {
	n, r, err := e.parseName(ctx, name)
	if r != nil || err != nil {
		return deref(r), err
	}
	if e.opts.Stage {
		if r, ok := e.stagedRead(n); ok {
			return r, nil
		}
	}
	m, err := e.store.Get(ctx, e.b.Tenant, e.b.Scope, n)
	if err != nil {
		return e.failed(err)
	}
	return Result{Text: FormatRead(m)}, nil
}

func deref(r *Result) Result {
	if r == nil {
		return Result{}
	}
	return *r
}

func (e *Executor) write(ctx context.Context, name, description, typ, body string) (Result, error) {
	n, r, err := e.parseName(ctx, name)
	if r != nil || err != nil {
		return deref(r), err
	}
	doc := memory.Document{Name: n, Description: description, Type: memory.Type(strings.TrimSpace(typ)), Body: body}
	return e.put(ctx, doc, memory.Expect{})
}

func (e *Executor) put(ctx context.Context, doc memory.Document, exp memory.Expect) (Result, error) {
	if e.opts.Stage {
		return e.stageWrite(ctx, doc)
	}
	res, err := e.store.Write(ctx, e.b.Tenant, e.b.Scope, doc, e.change(""), exp)
	if err != nil {
		return e.failed(err)
	}
	e.record(ctx, res)
	switch res.Op {
	case memory.OpCreated:
		return Result{Text: fmt.Sprintf("Created %s (revision %d); the index lists it.", doc.Name.File(), res.Memory.Revision)}, nil
	case memory.OpUpdated:
		return Result{Text: fmt.Sprintf("Updated %s (revision %d).", doc.Name.File(), res.Memory.Revision)}, nil
	}
	return Result{Text: fmt.Sprintf("%s already holds exactly this; nothing changed.", doc.Name.File())}, nil
}

func (e *Executor) edit(ctx context.Context, name, old, replacement string, all bool) (Result, error) {
	n, r, err := e.parseName(ctx, name)
	if r != nil || err != nil {
		return deref(r), err
	}
	if old == "" {
		return e.refused(ctx, memory.Refuse(memory.ReasonBadEdit, "old_string is empty; give the exact text to replace"))
	}
	if old == replacement {
		return e.refused(ctx, memory.Refuse(memory.ReasonBadEdit, "old_string and new_string are the same"))
	}
	m, err := e.get(ctx, n)
	if err != nil {
		return e.failed(err)
	}
	text := m.Markdown()
	switch count := strings.Count(text, old); {
	case count == 0:
		return e.refused(ctx, memory.Refuse(memory.ReasonBadEdit, "old_string does not occur in %s; read it and copy the text exactly", n.File()))
	case count > 1 && !all:
		return e.refused(ctx, memory.Refuse(memory.ReasonBadEdit, "old_string occurs %d times in %s; give more surrounding text, or set replace_all", count, n.File()))
	}
	if all {
		text = strings.ReplaceAll(text, old, replacement)
	} else {
		text = strings.Replace(text, old, replacement, 1)
	}
	doc, err := memory.ParseDocument(text)
	if err != nil {
		return e.refused(ctx, err)
	}
	if doc.Name != n {
		return e.refused(ctx, memory.Refuse(memory.ReasonNameMismatch, "an edit cannot rename %s; write the new memory and delete the old one", n.File()))
	}
	// The edit applies to the revision it was made on.
	return e.put(ctx, doc, memory.Expect{Revision: m.Revision})
}

func (e *Executor) delete(ctx context.Context, name, reason string) (Result, error) {
	n, r, err := e.parseName(ctx, name)
	if r != nil || err != nil {
		return deref(r), err
	}
	if e.opts.Stage {
		return e.stageDelete(ctx, n, reason)
	}
	e.mu.Lock()
	allowed := e.opts.MaxDeletes == NoDeleteLimit || e.deletes < e.opts.MaxDeletes
	if allowed {
		e.deletes++ // taken now, so concurrent calls cannot overrun the limit
	}
	e.mu.Unlock()
	if !allowed {
		m, err := e.store.Get(ctx, e.b.Tenant, e.b.Scope, n)
		if err != nil {
			return e.failed(err)
		}
		e.mu.Lock()
		e.proposals = append(e.proposals, Proposal{Name: n, Revision: m.Revision, Reason: reason})
		e.mu.Unlock()
		return Result{Text: fmt.Sprintf("Not deleted: this run may delete at most %d memories. The deletion of %s is proposed for approval; leave it in the index for now.",
			max(e.opts.MaxDeletes, 0), n.File())}, nil
	}
	res, err := e.store.Delete(ctx, e.b.Tenant, e.b.Scope, n, e.change(reason), memory.Expect{})
	if err != nil {
		e.mu.Lock()
		e.deletes--
		e.mu.Unlock()
		return e.failed(err)
	}
	e.record(ctx, res)
	return Result{Text: fmt.Sprintf("Deleted %s (revision %d); it left the index and stays restorable.", n.File(), res.Memory.Revision)}, nil
}

func (e *Executor) readIndex(ctx context.Context) (Result, error) {
	if e.opts.Stage {
		return e.stagedIndex(ctx)
	}
	ix, err := e.store.Index(ctx, e.b.Tenant, e.b.Scope)
	if err != nil {
		return e.failed(err)
	}
	if ix.Content == "" {
		return Result{Text: fmt.Sprintf("The index (MEMORY.md) of %s is empty: no memories yet.", e.b.Scope)}, nil
	}
	return Result{Text: ix.Content}, nil
}

func (e *Executor) writeIndex(ctx context.Context, content string) (Result, error) {
	if e.opts.Stage {
		return e.stageIndex(ctx, content)
	}
	res, err := e.store.PutIndex(ctx, e.b.Tenant, e.b.Scope, content, e.change(""), 0)
	if err != nil {
		return e.failed(err)
	}
	if !res.Changed {
		return Result{Text: "The index already reads exactly so; nothing changed."}, nil
	}
	e.mu.Lock()
	e.indexChanged = true
	e.mu.Unlock()
	e.changed(ctx, memory.OpUpdated, "")
	text := fmt.Sprintf("Saved the index (revision %d, %d lines).", res.Index.Revision, len(res.Index.Lines()))
	if len(res.Appended) > 0 {
		files := make([]string, len(res.Appended))
		for i, n := range res.Appended {
			files[i] = n.File()
		}
		text += " The memories your edit left out were appended: " + strings.Join(files, ", ") + "."
	}
	return Result{Text: text}, nil
}
