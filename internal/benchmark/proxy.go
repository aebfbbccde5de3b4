package benchmark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// The Messages API proxy, measured two ways against the scripted upstream
// of the System (internal/testkit/llmtest/upstream, which models the prompt cache):
// the latency it adds to a round (ProxyLatency), and what a session costs
// through it (ProxyCost). The client is the bench's own, sending what
// Claude Code sends: the whole conversation every round, cache_control on
// the system prompt and on the last message.

// proxyModel is the model every request names: a 200K window.
const proxyModel = "claude-sonnet-4-5"

// proxySessions is how many sessions the latency samples of one size take
// turns on, so that each grows by few rounds while it is measured.
const proxySessions = 10

// proxyBatch is how many samples one scripted upstream answers before a
// fresh one replaces it: an upstream keeps every call it answered, and the
// 150K-token ones are 600 KB each.
const proxyBatch = 20

// block is a content block as a client holds it.
type block = map[string]any

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
	// encoded is the message as request encodes it when it is not the
	// last, kept: a conversation resends every message each round, and
	// encoding a long one's maps again each time would make this client
	// a large part of what a benchmark run on the same machine measures.
	// A message's content does not change once it is in a conversation.
	encoded []byte
}

// conversation is a client's side of a session: what it sends each round.
type conversation struct {
	system []block
	tools  []block
	msgs   []message
}

var ephemeral = map[string]string{"type": "ephemeral"}

// marked is blocks with cache_control on the last, which is copied: the
// conversation's own blocks stay as they are.
func marked(blocks []block) []block {
	out := slices.Clone(blocks)
	if n := len(out); n > 0 {
		out[n-1] = maps.Clone(out[n-1])
		out[n-1]["cache_control"] = ephemeral
	}
	return out
}

// request is the next round's body: the whole conversation, with
// cache_control on the last block of the system prompt and of the last
// message, as Claude Code sends it; encoded as json.Encoder (HTML left
// unescaped) encodes it as a map, keys sorted.
func (c *conversation) request() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as the API's clients send <system-reminder>
	put := func(v any) error {
		if err := enc.Encode(v); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // the Encoder's newline
		return nil
	}
	buf.WriteString(`{"max_tokens":8192,"messages":[`)
	for i := range c.msgs {
		m := &c.msgs[i]
		if i > 0 {
			buf.WriteByte(',')
		}
		switch {
		case i == len(c.msgs)-1:
			if err := put(message{Role: m.Role, Content: marked(m.Content)}); err != nil {
				return nil, err
			}
		case m.encoded != nil:
			buf.Write(m.encoded)
		default:
			start := buf.Len()
			if err := put(m); err != nil {
				return nil, err
			}
			m.encoded = bytes.Clone(buf.Bytes()[start:])
		}
	}
	buf.WriteString(`],"model":`)
	if err := put(proxyModel); err != nil {
		return nil, err
	}
	buf.WriteString(`,"system":`)
	if err := put(marked(c.system)); err != nil {
		return nil, err
	}
	if len(c.tools) > 0 {
		buf.WriteString(`,"tools":`)
		if err := put(c.tools); err != nil {
			return nil, err
		}
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// answered adds the model's answer to the conversation, and the results of
// its tool calls as result says them; it reports the tool calls' inputs.
func (c *conversation) answered(a answer, result func(input map[string]any) string) []map[string]any {
	c.msgs = append(c.msgs, message{Role: "assistant", Content: a.Content})
	var calls []map[string]any
	var results []block
	for _, b := range a.Content {
		if b["type"] != "tool_use" {
			continue
		}
		input, _ := b["input"].(map[string]any)
		calls = append(calls, input)
		results = append(results, block{"type": "tool_result", "tool_use_id": b["id"], "content": result(input)})
	}
	if len(results) > 0 {
		c.msgs = append(c.msgs, message{Role: "user", Content: results})
	}
	return calls
}

// answer is the part of a Messages API answer the client reads.
type answer struct {
	Content []block        `json:"content"`
	Usage   upstream.Usage `json:"usage"`
}

// proxyClient is the bench's HTTP client for the proxy and the upstream:
// connections kept, as an agent's SDK keeps them.
var proxyClient = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}

// straightKey stands for a client's key where the upstream is called
// directly; through Mnemos the tenant's key is sent.
const straightKey = "bench-straight-key" //nolint:gosec // the scripted upstream checks no key

// post sends a round to base's /v1/messages — Mnemos's, for session, when
// session is set, else the upstream's — and reads the whole answer; took is
// from sending to the last byte read.
func post(ctx context.Context, base, session string, body []byte) (a answer, took time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return a, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Api-Key", straightKey)
	if session != "" {
		req.Header.Set("X-Api-Key", APIKey)
		req.Header.Set(httpapi.HeaderAgentSession, session)
	}
	start := time.Now()
	resp, err := proxyClient.Do(req)
	if err != nil {
		return a, 0, fmt.Errorf("benchmark: messages: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	took = time.Since(start)
	if err != nil {
		return a, 0, fmt.Errorf("benchmark: messages: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return a, 0, fmt.Errorf("benchmark: messages to %s: HTTP %d: %.300s", base, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, 0, fmt.Errorf("benchmark: messages: the answer: %w", err)
	}
	return a, took, nil
}

// ProxyTiming is the proxy at one session size: rounds sent through
// Mnemos and the same requests sent straight to the upstream.
type ProxyTiming struct {
	// Tokens is the size the sessions were built to; Sent the smallest and
	// largest of the timed requests as the upstream measured them, and
	// Differed how many of them reached it through Mnemos in another size
	// than straight (0 when the proxy passed them on unchanged).
	Tokens            int64
	Sent              [2]int64
	Differed          int
	Through, Straight []time.Duration
	// CPU is where the machine's CPU went over the timed rounds, when
	// HasCPU.
	CPU    CPU
	HasCPU bool
}

// ProxyLatency times rounds of sessions of about size tokens through
// Mnemos's POST /v1/messages and the same requests straight to the
// upstream, samples of each, interleaved. The sessions (proxySessions of
// them, taking turns) are conversations of requests, tool calls and their
// 3,200-byte results (builtConversation), stored through Mnemos by untimed
// rounds (prime) and warmed by one more; each sample is a round that
// answers the model's last tool call, as an agent's next request does, and
// the model calls the tool again.
func (s *System) ProxyLatency(ctx context.Context, run string, size int64, samples int) (ProxyTiming, error) {
	out := ProxyTiming{Tokens: size}
	fresh := func() *upstream.Upstream {
		up := upstream.New(upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens,
			Script: func(*upstream.Request) (upstream.Reply, error) {
				return upstream.Say(upstream.ToolUse("Task", map[string]any{"prompt": "keep going"})), nil
			}})
		s.UseUpstream(up)
		return up
	}
	done := func(map[string]any) string { return "done" }

	convs := make([]*conversation, min(samples, proxySessions))
	ids := make([]string, len(convs))
	for i := range convs {
		ids[i] = fmt.Sprintf("%s-proxy%dk-%d", run, size/1000, i)
		c, rounds := builtConversation(ids[i], size)
		stored, err := s.prime(ctx, ids[i], c, rounds)
		if err != nil {
			return out, err
		}
		fresh()
		c.msgs = append(c.msgs, message{Role: "user", Content: []block{{"type": "text", "text": "Now make it read the file lazily."}}})
		body, err := c.request()
		if err != nil {
			return out, err
		}
		a, _, err := post(ctx, s.API, ids[i], body)
		if err != nil {
			return out, err
		}
		c.answered(a, done)
		if _, _, err := post(ctx, s.Upstream, "", body); err != nil {
			return out, err
		}
		if err := s.awaitRounds(ctx, ids[i], stored+1); err != nil {
			return out, err
		}
		convs[i] = c
	}
	measured := func(up *upstream.Upstream) {
		// The upstream saw each sample's two requests in the order sent.
		calls := up.Messages()
		for i := 0; i+1 < len(calls); i += 2 {
			a, b := calls[i].Usage.InputSide(), calls[i+1].Usage.InputSide()
			if a != b {
				out.Differed++
			}
			for _, n := range []int64{a, b} {
				if out.Sent[0] == 0 || n < out.Sent[0] {
					out.Sent[0] = n
				}
				out.Sent[1] = max(out.Sent[1], n)
			}
		}
	}
	up := fresh()
	cpu := sampleCPU()
	for i := range samples {
		if i > 0 && i%proxyBatch == 0 {
			measured(up)
			up = fresh()
		}
		c, id := convs[i%len(convs)], ids[i%len(convs)]
		body, err := c.request()
		if err != nil {
			return out, err
		}
		// Alternate which goes first, so that neither always finds the
		// other's work done (a collection, a cache warmed).
		var a answer
		var through, straight time.Duration
		if i%2 == 0 {
			if a, through, err = post(ctx, s.API, id, body); err == nil {
				_, straight, err = post(ctx, s.Upstream, "", body)
			}
		} else {
			if _, straight, err = post(ctx, s.Upstream, "", body); err == nil {
				a, through, err = post(ctx, s.API, id, body)
			}
		}
		if err != nil {
			return out, err
		}
		c.answered(a, done)
		out.Through, out.Straight = append(out.Through, through), append(out.Straight, straight)
	}
	out.CPU, out.HasCPU = cpuSince(cpu)
	measured(up)
	return out, nil
}

// The rounds of a built conversation: a request, a call of Task with its
// result, and the answer that ends the round.
const (
	builtAnswer   = "Found it; the loader reads the file once."
	builtPerRound = 4
	builtResult   = 3_200 // bytes of each tool result
)

// builtConversation is a session of about size tokens, as the upstream
// counts them, in rounds of a request, a call of Task (which
// micro-compaction never clears, so Mnemos passes the request on as sent)
// with its result, and builtAnswer; and how many rounds it holds.
func builtConversation(id string, size int64) (*conversation, int) {
	c := &conversation{system: []block{{"type": "text", "text": "You are a coding agent. Work in small steps and say what you changed."}}}
	var tokens int64
	add := func(role string, content ...block) {
		data, _ := json.Marshal(content) // maps of strings always encode
		tokens += int64(len(data))/4 + 4
		c.msgs = append(c.msgs, message{Role: role, Content: content})
	}
	rounds := 0
	for ; tokens < size; rounds++ {
		call := fmt.Sprintf("toolu_%s_%d", strings.ReplaceAll(id, "-", "_"), rounds)
		add("user", block{"type": "text", "text": strings.Repeat("Please keep going with the refactor. ", 11)})
		add("assistant", block{"type": "text", "text": "Searching."},
			block{"type": "tool_use", "id": call, "name": "Task", "input": map[string]any{"description": "look around", "prompt": "find the config loader"}})
		add("user", block{"type": "tool_result", "tool_use_id": call,
			"content": strings.Repeat(fmt.Sprintf("result %d of the search. ", rounds), 200)[:builtResult]})
		add("assistant", block{"type": "text", "text": builtAnswer})
	}
	return c, rounds
}

// primeResults is how many tool results one priming round adds: under the
// tool-result characters a turn may add before Mnemos offloads the largest
// (accounting.DefaultOffload's TurnCapChars, 200,000), as an agent's rounds
// would.
const primeResults = 150_000 / builtResult

// prime stores a built conversation of rounds rounds in session id through
// Mnemos, by requests that each end before one of its answers, which the
// upstream then gives, each sent once the one before is applied; it
// returns how many requests it sent. Sent back to back, the last request
// would carry a hundred rounds the session has not stored, counted by the
// raw estimate in a session whose responses have taught it nothing yet (a
// tenant's first): 14% over what the upstream counts, past the
// auto-compact threshold, and the session would be compacted before it is
// measured.
func (s *System) prime(ctx context.Context, id string, c *conversation, rounds int) (int64, error) {
	up := upstream.New(upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Final(builtAnswer), nil
	}})
	s.UseUpstream(up)
	full := c.msgs
	var sent int64
	for done := 0; done < rounds; done += primeResults {
		c.msgs = full[:min(done+primeResults, rounds)*builtPerRound-1]
		body, err := c.request()
		if err != nil {
			return sent, err
		}
		if _, _, err := post(ctx, s.API, id, body); err != nil {
			return sent, err
		}
		sent++
		if err := s.awaitRounds(ctx, id, sent); err != nil {
			return sent, err
		}
	}
	c.msgs = full
	return sent, nil
}

// awaitRounds waits until the session has applied its first rounds.
func (s *System) awaitRounds(ctx context.Context, id string, rounds int64) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		sess, err := s.Store.GetSession(ctx, Tenant, id)
		if err == nil && sess.AppliedSeq >= rounds {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("benchmark: session %s did not apply round %d: %w", id, rounds, errors.Join(ctx.Err(), err))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ProxyCost is one session run twice by the same client, straight to the
// upstream and through Mnemos, each against a prompt cache of its own:
// what the upstream was asked to read, write and take as plain input.
type ProxyCost struct {
	Name         string
	Files, Lines int
	// Straight and Through are the calls' usage summed; Largest* the
	// largest call's input; Calls how many each made.
	Straight, Through               upstream.Usage
	LargestStraight, LargestThrough int64
	CallsStraight, CallsThrough     int
	// Threshold is the session's auto-compact threshold, as Mnemos reports it.
	Threshold int64
}

// ProxyCost has the model read files of lines lines, one a round, and then
// answer, in a session of Claude Code's shape: tools and a system prompt
// of about 12K tokens, CLAUDE.md in a reminder at the front of the first
// message, cache_control on the system prompt and the last message. A file
// of 600 lines is about 9,000 tokens, under the size from which Mnemos
// offloads a tool result, so only (micro-)compaction keeps the session
// from growing.
func (s *System) ProxyCost(ctx context.Context, run, name string, files, lines int) (ProxyCost, error) {
	out := ProxyCost{Name: name, Files: files, Lines: lines}
	straight, err := s.converse(ctx, "", files, lines)
	if err != nil {
		return out, err
	}
	id := fmt.Sprintf("%s-cost-%s", run, name)
	through, err := s.converse(ctx, id, files, lines)
	if err != nil {
		return out, err
	}
	out.Straight, out.Through = upstream.Sum(straight), upstream.Sum(through)
	out.CallsStraight, out.CallsThrough = len(straight), len(through)
	for _, c := range straight {
		out.LargestStraight = max(out.LargestStraight, c.Usage.InputSide())
	}
	for _, c := range through {
		out.LargestThrough = max(out.LargestThrough, c.Usage.InputSide())
	}
	// The session's rounds are recorded and applied after their answers:
	// its status is there once the last one is.
	if err := s.awaitRounds(ctx, id, int64(len(through))); err != nil {
		return out, err
	}
	var status struct {
		Tokens struct {
			AutoCompact int64 `json:"autocompact_threshold"`
		} `json:"tokens"`
	}
	if err := s.getJSON(ctx, "/v1/sessions/"+id, &status); err != nil {
		return out, err
	}
	out.Threshold = status.Tokens.AutoCompact
	return out, nil
}

// converse runs the session's conversation to its end — through Mnemos as
// session when it is set, else straight — against a fresh upstream, and
// returns the calls it answered.
func (s *System) converse(ctx context.Context, session string, files, lines int) ([]upstream.Call, error) {
	content := map[string]string{}
	for n := 1; n <= files; n++ {
		content[reportPath(n)] = report(n, lines)
	}
	up := upstream.New(upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens, Script: func(r *upstream.Request) (upstream.Reply, error) {
		// From the last message only, so that it answers the same whatever
		// Mnemos did to the history before it.
		next := 1
		if last := r.Last(); last.IsToolResult() {
			var text string
			var n int
			if err := json.Unmarshal(last.Blocks()[0].Content, &text); err != nil {
				return upstream.Reply{}, fmt.Errorf("a tool result that is not a string: %w", err)
			}
			if _, err := fmt.Sscanf(text, "report %d", &n); err != nil {
				return upstream.Reply{}, fmt.Errorf("a tool result without a report: %w", err)
			}
			next = n + 1
		}
		if next > files {
			return upstream.Final("Every report is read; region 7 needs attention first."), nil
		}
		return upstream.Say(upstream.Text("Reading the next one."), upstream.ToolUse("Read", map[string]any{"file_path": reportPath(next)})), nil
	}})
	s.UseUpstream(up)
	c := claudeCodeConversation()
	base := s.Upstream
	if session != "" {
		base = s.API
	}
	read := func(input map[string]any) string {
		path, _ := input["file_path"].(string)
		return content[path]
	}
	for round := 0; ; round++ {
		if round > files {
			return nil, fmt.Errorf("benchmark: the conversation did not end after %d rounds", round)
		}
		body, err := c.request()
		if err != nil {
			return nil, err
		}
		a, _, err := post(ctx, base, session, body)
		if err != nil {
			return nil, err
		}
		if calls := c.answered(a, read); len(calls) == 0 {
			return up.Messages(), nil
		}
	}
}

func reportPath(n int) string { return fmt.Sprintf("/work/reports/r%02d.txt", n) }

// report is the text of report n: its name, then lines of figures, about
// 15 tokens a line.
func report(n, lines int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "report %d\n", n)
	for i := range lines {
		fmt.Fprintf(&b, "line %04d region %02d sales %6d returns %4d notes q%d-%d\n", i, (i+n)%12, (i*97+n*13)%100000, (i*7)%1000, n, i)
	}
	return b.String()
}

// claudeCodeConversation is the start of a session as Claude Code sends
// it: eight tools and a system prompt, about 12K tokens, and a first
// message whose CLAUDE.md reminder comes before the request.
func claudeCodeConversation() *conversation {
	c := &conversation{system: []block{{"type": "text", "text": strings.Repeat(
		"You are an interactive agent that helps users with software engineering tasks. Use the tools available to you; read before you edit. ", 76)}}}
	for _, name := range []string{"Read", "Bash", "Edit", "Write", "Grep", "Glob", "Task", "TodoWrite"} {
		c.tools = append(c.tools, block{
			"name": name,
			"description": strings.Repeat(fmt.Sprintf(
				"%s does one thing well; call it with the parameters below and read what it answers before the next step. ", name), 44),
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{
				"file_path": map[string]string{"type": "string", "description": "The absolute path of the file."},
			}},
		})
	}
	c.msgs = []message{{Role: "user", Content: []block{
		{"type": "text", "text": "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\nReports live in reports/. Never delete one.\n</system-reminder>"},
		{"type": "text", "text": "Read every report under reports/ and tell me which region needs attention first."},
	}}}
	return c
}

// getJSON reads a JSON answer of Mnemos's API.
func (s *System) getJSON(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.API+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("benchmark: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("benchmark: GET %s: HTTP %d", path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
