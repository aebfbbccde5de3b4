// Package sessionctx loads a session's current context from the store: the
// head its latest compaction made, the stored messages after the kept point,
// and the frozen micro-compaction decisions. The gateway renders it and the
// compactor summarizes it.
package sessionctx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/pkg/view"
)

// State is a session's context as stored.
type State struct {
	Session store.Session
	// Compaction is the latest completed compaction; its ID is "" before the first.
	Compaction store.Compaction
	// Head holds the messages Compaction made; Messages the stored messages
	// from the session's KeepFrom on.
	Head     []view.Message
	Messages []view.Message
	// Cleared holds the tool_use ids micro-compaction cleared.
	Cleared map[string]bool
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
func LoadFor(ctx context.Context, tx *store.Tx, sess store.Session) (State, error) {
	st := State{Session: sess, Cleared: map[string]bool{}}
	if sess.CompactionID != "" {
		c, err := tx.Compaction(ctx, sess.CompactionID)
		if err != nil {
			return State{}, fmt.Errorf("sessionctx.Load: compaction: %w", err)
		}
		if st.Head, err = DecodeHead(c.Head); err != nil {
			return State{}, fmt.Errorf("sessionctx.Load: compaction %s: %w", c.ID, err)
		}
		st.Compaction = c
	}
	rows, err := tx.MessagesFrom(ctx, sess.SessionID, sess.KeepFrom)
	if err != nil {
		return State{}, err
	}
	if st.Messages, err = Messages(rows); err != nil {
		return State{}, fmt.Errorf("sessionctx.Load: %w", err)
	}
	cleared, err := tx.ReplacementsOfKind(ctx, sess.SessionID, store.ReplaceMicrocompact)
	if err != nil {
		return State{}, err
	}
	for _, r := range cleared {
		st.Cleared[r.ToolUseID] = true
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
		out[i] = view.Message{UUID: r.UUID, Position: r.Position, Round: r.Seq, Role: r.Role, Content: c, Tokens: r.EstimateTokens}
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

// ApplyCleared returns msgs with the tool results in cleared replaced by
// text, as the context renders them; msgs is not changed.
func ApplyCleared(msgs []view.Message, cleared map[string]bool, text string) []view.Message {
	if len(cleared) == 0 {
		return msgs
	}
	out := make([]view.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		var content turn.Content
		for j, b := range m.Content {
			if b.Type != turn.BlockToolResult || !cleared[b.ToolUseID] {
				continue
			}
			if content == nil {
				content = append(turn.Content(nil), m.Content...)
			}
			c := turn.Content{{Type: turn.BlockText, Text: text}}
			content[j].Content = &c
		}
		if content != nil {
			out[i].Content = content
			out[i].Tokens = tokens.EstimateContent(content)
		}
	}
	return out
}
