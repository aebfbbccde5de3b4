// Package sessionctx loads a session's current context from the store: the
// head its latest compaction made, the stored messages after the kept point,
// and the frozen decisions of micro-compaction and context-management
// edits. The gateway renders it and the compactor summarizes it.
package sessionctx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// State is a session's context as stored.
type State struct {
	Session sessionstate.Session
	// Compaction is the latest completed compaction; its ID is "" before the first.
	Compaction store.Compaction
	// Head holds the messages Compaction made; Messages the stored messages
	// from the session's KeepFrom on.
	Head     []view.Message
	Messages []view.Message
	// Cleared holds the tool_use ids micro-compaction cleared.
	Cleared map[string]bool
	// Cuts are the recorded decisions of context-management edits.
	Cuts assembly.Cuts
}

// Load reads a session's context in tx. It returns store.ErrNotFound when
// the session does not exist.
func Load(ctx context.Context, tx *store.Tx, sessionID string) (State, error) {
	sess, err := tx.Session(ctx, sessionID)
	if err != nil {
		return State{}, err
	}
	return LoadFor(ctx, tx, sess)
}

// LoadFor reads the context of a session already read (or locked) in tx.
func LoadFor(ctx context.Context, tx *store.Tx, sess sessionstate.Session) (State, error) {
	rows, err := tx.MessagesFrom(ctx, sess.SessionID, sess.KeepFrom)
	if err != nil {
		return State{}, err
	}
	msgs, err := Messages(throughCount(rows, sess))
	if err != nil {
		return State{}, fmt.Errorf("sessionctx.Load: %w", err)
	}
	return withMessages(ctx, tx, sess, msgs)
}

// LoadAll reads the context of a session and, in the same read, every
// message the session ever stored (the compactor restores files from them).
func LoadAll(ctx context.Context, tx *store.Tx, sessionID string) (State, []view.Message, error) {
	sess, err := tx.Session(ctx, sessionID)
	if err != nil {
		return State{}, nil, err
	}
	rows, err := tx.Messages(ctx, sessionID)
	if err != nil {
		return State{}, nil, err
	}
	all, err := Messages(throughCount(rows, sess))
	if err != nil {
		return State{}, nil, fmt.Errorf("sessionctx.LoadAll: %w", err)
	}
	first := len(all)
	for i, m := range all {
		if m.Position >= sess.KeepFrom {
			first = i
			break
		}
	}
	st, err := withMessages(ctx, tx, sess, all[first:])
	return st, all, err
}

// withMessages completes a State around its stored messages: the latest
// compaction's head and the frozen decisions of micro-compaction and of
// context-management edits, read together.
func withMessages(ctx context.Context, tx *store.Tx, sess sessionstate.Session, msgs []view.Message) (State, error) {
	var c store.Compaction
	if sess.CompactionID != "" {
		var err error
		if c, err = tx.Compaction(ctx, sess.CompactionID); err != nil {
			return State{}, fmt.Errorf("sessionctx.Load: compaction: %w", err)
		}
	}
	decided, err := decisions(ctx, tx, sess.SessionID)
	if err != nil {
		return State{}, err
	}
	return stateOf(sess, msgs, c, decided)
}

// decisions reads the frozen decisions a render applies: micro-compaction's
// and context-management edits'.
func decisions(ctx context.Context, tx *store.Tx, sessionID string) ([]store.Replacement, error) {
	return tx.ReplacementsOfKinds(ctx, sessionID, store.ReplaceMicrocompact,
		store.ReplaceClearToolUses, store.ReplaceClearToolInput, store.ReplaceClearThinking)
}

// stateOf is the State of sess made of what was read: its messages, its
// compaction (when sess names one) and its decisions.
func stateOf(sess sessionstate.Session, msgs []view.Message, c store.Compaction, decided []store.Replacement) (State, error) {
	st := State{Session: sess, Messages: msgs, Cleared: map[string]bool{}}
	if sess.CompactionID != "" {
		head, err := DecodeHead(c.Head)
		if err != nil {
			return State{}, fmt.Errorf("sessionctx.Load: compaction %s: %w", c.ID, err)
		}
		st.Head, st.Compaction = head, c
	}
	st.Cuts = assembly.Cuts{ToolUses: map[string]bool{}, Inputs: map[string]bool{}, Thinking: map[string]bool{}}
	for _, r := range decided {
		switch r.Kind {
		case store.ReplaceMicrocompact:
			st.Cleared[r.ToolUseID] = true
		case store.ReplaceClearToolUses:
			st.Cuts.ToolUses[r.ToolUseID] = true
		case store.ReplaceClearToolInput:
			st.Cuts.Inputs[r.ToolUseID] = true
		case store.ReplaceClearThinking:
			st.Cuts.Thinking[r.ToolUseID] = true
		}
	}
	return st, nil
}

// Messages converts stored messages to view messages.
func Messages(rows []store.Message) ([]view.Message, error) {
	out := make([]view.Message, len(rows))
	for i, r := range rows {
		var c turn.Content
		if err := json.Unmarshal(r.Content, &c); err != nil {
			return nil, fmt.Errorf("message %s: %w", r.UUID, err)
		}
		out[i] = view.Message{UUID: r.UUID, Position: r.Position, Round: r.Seq, Role: r.Role, Content: c, Tokens: r.EstimateTokens, At: r.CreatedAt}
	}
	return out, nil
}

// headMessage is how a head message is stored: the wire shape.
type headMessage struct {
	Role    string       `json:"role"`
	Content turn.Content `json:"content"`
}

// EncodeHead encodes the messages a compaction made for storing.
func EncodeHead(msgs []view.Message) ([]byte, error) {
	out := make([]headMessage, len(msgs))
	for i, m := range msgs {
		out[i] = headMessage{Role: m.Role, Content: m.Content}
	}
	b, err := turn.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("sessionctx.EncodeHead: %w", err)
	}
	return b, nil
}

// DecodeHead decodes a stored head.
func DecodeHead(raw []byte) ([]view.Message, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var in []headMessage
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	out := make([]view.Message, len(in))
	for i, m := range in {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, errors.New("head: message without a user or assistant role")
		}
		out[i] = HeadMessage(m.Role, m.Content)
	}
	return out, nil
}

// HeadMessage makes a message of a compaction's head.
func HeadMessage(role string, content turn.Content) view.Message {
	return view.Message{Position: -1, Role: role, Content: content, Tokens: tokens.EstimateContent(content)}
}
