package compaction_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// fakeProvider answers every call with fn and records the requests.
type fakeProvider struct {
	fn func(ctx context.Context, req llm.Request) (llm.Response, error)

	mu   sync.Mutex
	reqs []llm.Request
}

func (p *fakeProvider) Name() string { return "fake" }

func (p *fakeProvider) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	return p.fn(ctx, req)
}

func (p *fakeProvider) requests() []llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]llm.Request(nil), p.reqs...)
}

// Block builders.

func text(s string) turn.Block { return turn.Block{Type: turn.BlockText, Text: s} }

func thinking(s string) turn.Block {
	return turn.Block{Type: turn.BlockThinking, Thinking: s, Signature: "sig"}
}

func image() turn.Block {
	return turn.Block{Type: turn.BlockImage, Source: json.RawMessage(`{"type":"base64","media_type":"image/png","data":"AAAA"}`)}
}

func document() turn.Block {
	return turn.Block{Type: turn.BlockDocument, Source: json.RawMessage(`{"type":"text","media_type":"text/plain","data":"doc"}`)}
}

func toolUse(id, name string, input map[string]any) turn.Block {
	data, _ := json.Marshal(input) // plain maps always encode
	return turn.Block{Type: turn.BlockToolUse, ID: id, Name: name, Input: data}
}

func toolResult(id, s string) turn.Block {
	c := turn.Content{text(s)}
	return turn.Block{Type: turn.BlockToolResult, ToolUseID: id, Content: &c}
}

func toolError(id, s string) turn.Block {
	b := toolResult(id, s)
	b.IsError = true
	return b
}

// msg is a stored message of round, its tokens estimated.
func msg(role string, round int64, blocks ...turn.Block) view.Message {
	c := turn.Content(blocks)
	return view.Message{Role: role, Round: round, Content: c, Tokens: tokens.EstimateContent(c)}
}

func user(round int64, blocks ...turn.Block) view.Message { return msg("user", round, blocks...) }

func assistant(round int64, blocks ...turn.Block) view.Message {
	return msg("assistant", round, blocks...)
}

// numbered gives the messages uuids m0, m1, … and positions 0, 1, ….
func numbered(msgs ...view.Message) []view.Message {
	for i := range msgs {
		msgs[i].UUID = "m" + strconv.Itoa(i)
		msgs[i].Position = int64(i)
	}
	return msgs
}

// fixtureContext is the context of one session of a fixture transcript,
// without any compaction: every message of every event, in order.
type fixtureContext struct {
	name     string
	messages []view.Message
}

func fixtureContexts(t *testing.T) []fixtureContext {
	t.Helper()
	var out []fixtureContext
	files := make([]string, 0, len(claudecodetest.Names)+1)
	for _, name := range claudecodetest.Names {
		files = append(files, claudecodetest.Path(t, name))
	}
	// The sub-agent's own transcript is a session of its own.
	files = append(files, claudecodetest.SubagentPaths(t, "subagent.jsonl")...)
	for _, path := range files {
		name := filepath.Base(path)
		f, err := os.Open(path)
		require.NoError(t, err)
		recs, err := claudecode.Parse(f)
		require.NoError(t, f.Close())
		require.NoError(t, err)
		events := claudecode.Events(claudecode.Group(recs, claudecode.GroupOptions{}), claudecode.EventOptions{})
		bySession := map[string]int{}
		for _, ev := range events {
			i, ok := bySession[ev.SessionID]
			if !ok {
				i = len(out)
				bySession[ev.SessionID] = i
				out = append(out, fixtureContext{name: name + "/" + ev.SessionID})
			}
			for _, m := range ev.Messages() {
				out[i].messages = append(out[i].messages, view.Message{
					UUID: m.UUID, Position: int64(len(out[i].messages)), Round: ev.Seq,
					Role: m.Role, Content: m.Content, Tokens: tokens.EstimateMessage(m),
				})
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}
