// Command costreplay serves a scripted Anthropic Messages API that answers
// Mnemos's own model calls as a model would, for measuring what a replay
// costs by service (docs/token-accounting.md, "Cost of a long replay").
//
// Each call is recognised by its system prompt (compaction, session notes,
// extraction, recall, dreaming), turned back into an llm.Request and
// answered by that task's builtin handler, whose answer goes back on the
// wire: text, tool calls, or the forced answer tool of a JSON answer. The
// usage it reports follows the upstream package's model of the prompt
// cache, so cache writes and reads are priced as the API would bill them.
//
//	go run ./internal/costreplay -addr 127.0.0.1:8099
//
// then run Mnemos with ANTHROPIC_API_KEY=any and
// MNEMOS_ANTHROPIC_BASE_URL=http://127.0.0.1:8099. On SIGINT it prints the
// calls it answered by task.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory/consolidate"
	"github.com/mnemos-ai/mnemos/pkg/memory/extraction"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// tasks recognise a call by how its system prompt starts.
var tasks = []struct {
	lead    string
	task    llm.Task
	handler builtin.Handler
}{
	{"You write hand-over summaries", llm.TaskCompaction, compaction.BuiltinSummarizer},
	{"You keep the running notes", llm.TaskNotes, sessionnotes.Builtin},
	{"You keep the long-term memory", llm.TaskExtraction, extraction.Builtin},
	{"You decide which saved memories", llm.TaskRecall, recall.Builtin},
	{"You look after the long-term memory", llm.TaskDreaming, consolidate.Builtin},
}

type counter struct {
	mu sync.Mutex
	n  map[llm.Task]int
}

func (c *counter) add(t llm.Task) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[t]++
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8099", "listen address")
	flag.Parse()
	calls := &counter{n: map[llm.Task]int{}}
	up := upstream.New(upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens, Script: func(r *upstream.Request) (upstream.Reply, error) {
		return answer(r, calls)
	}})
	srv := &http.Server{Addr: *addr, Handler: up, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close() // the measurement is over
	}()
	log.Printf("scripted Messages API on http://%s", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	calls.mu.Lock()
	defer calls.mu.Unlock()
	for _, t := range llm.Tasks {
		fmt.Printf("%-10s %d calls\n", t, calls.n[t])
	}
}

// answer turns the wire request back into the task's llm.Request and
// answers it with the task's builtin handler.
func answer(r *upstream.Request, calls *counter) (upstream.Reply, error) {
	req, err := request(r)
	if err != nil {
		return upstream.Reply{}, err
	}
	for _, t := range tasks {
		if strings.HasPrefix(strings.TrimSpace(req.System), t.lead) {
			req.Task = t.task
			calls.add(t.task)
			resp, err := t.handler(context.Background(), req)
			if err != nil {
				return upstream.Reply{}, fmt.Errorf("%s: %w", t.task, err)
			}
			return reply(req, resp), nil
		}
	}
	return upstream.Reply{}, fmt.Errorf("a call of no known task (system prompt %.60q)", req.System)
}

func request(r *upstream.Request) (llm.Request, error) {
	req := llm.Request{Model: r.Model, MaxTokens: r.MaxTokens}
	var s string
	if json.Unmarshal(r.System, &s) == nil {
		req.System = s
	} else {
		var blocks []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(r.System, &blocks); err != nil && len(r.System) > 0 {
			return req, fmt.Errorf("system: %w", err)
		}
		for _, b := range blocks {
			req.System += b.Text
		}
	}
	for _, m := range r.Messages {
		var c turn.Content
		if json.Unmarshal(m.Content, &s) == nil {
			c = turn.Content{{Type: turn.BlockText, Text: s}}
		} else if err := json.Unmarshal(m.Content, &c); err != nil {
			return req, fmt.Errorf("message content: %w", err)
		}
		req.Messages = append(req.Messages, llm.Message{Role: m.Role, Content: c})
	}
	for _, raw := range r.Tools {
		var t llm.Tool
		if err := json.Unmarshal(raw, &t); err != nil {
			return req, fmt.Errorf("tool: %w", err)
		}
		if t.Name == anthropic.AnswerTool {
			req.JSONSchema = t.InputSchema
			continue
		}
		req.Tools = append(req.Tools, t)
	}
	return req, nil
}

func reply(req llm.Request, resp llm.Response) upstream.Reply {
	if req.JSONSchema != nil {
		return upstream.Say(upstream.ToolUse(anthropic.AnswerTool, json.RawMessage(resp.Text)))
	}
	var blocks []upstream.Block
	if resp.Text != "" {
		blocks = append(blocks, upstream.Text(resp.Text))
	}
	for _, c := range resp.ToolCalls {
		blocks = append(blocks, upstream.ToolUse(c.Name, c.Input))
	}
	if len(blocks) == 0 {
		blocks = append(blocks, upstream.Text("Nothing to add."))
	}
	return upstream.Say(blocks...)
}
