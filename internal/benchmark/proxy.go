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
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Anthropic-Version", "2023-06-01")
	h.Set("X-Api-Key", straightKey)
	if session != "" {
		h.Set("X-Api-Key", APIKey)
		h.Set(httpapi.HeaderAgentSession, session)
	}
	data, took, err := roundTrip(ctx, base+"/v1/messages", h, body)
	if err != nil {
		return a, 0, err
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, 0, fmt.Errorf("benchmark: messages: the answer: %w", err)
	}
	return a, took, nil
}

// roundTrip posts body to url with header and reads the whole answer,
// which must be a 200; took is from sending to the last byte read.
func roundTrip(ctx context.Context, url string, header http.Header, body []byte) (data []byte, took time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header = header
	start := time.Now()
	resp, err := proxyClient.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("benchmark: POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(resp.Body)
	took = time.Since(start)
	if err != nil {
		return nil, 0, fmt.Errorf("benchmark: POST %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("benchmark: POST %s: HTTP %d: %.300s", url, resp.StatusCode, data)
	}
	return data, took, nil
}

// The proxy's doors the bench times.
const (
	// DoorMessages is POST /v1/messages, Anthropic's Messages API, sent
	// as Claude Code sends it (conversation), not streamed.
	DoorMessages = "messages"
	// DoorResponses is POST /v1/responses, OpenAI's Responses API, sent
	// as the Codex CLI sends it (codexConversation), streamed.
	DoorResponses = "responses"
)

// Doors are the values Options.ProxyDoors takes.
var Doors = []string{DoorMessages, DoorResponses}

// door is one of the proxy's doors as ProxyLatency drives it: its client's
// sessions and its scripted upstream.
type door interface {
	// build is a client's side of session id, about size tokens in
	// builtConversation's rounds, and how many rounds it holds.
	build(id string, size int64) (doorSession, int)
	// answer has a fresh scripted upstream answer the door's calls from
	// now on: with builtAnswer when final, else with a call of the tool.
	// sizes are the inputs of the calls it has answered, in order, as it
	// counts them.
	answer(final bool) (sizes func() []int64)
}

// doorSession is a client's side of a session at a door.
type doorSession interface {
	// request is the next round's body: the whole history.
	request() ([]byte, error)
	// beforeAnswer is the body the client sent before the model's answer
	// ended the built history's round rounds: every round up to it, but
	// for that answer.
	beforeAnswer(rounds int) ([]byte, error)
	// ask adds a user's request to the history.
	ask(text string)
	// send posts body through Mnemos as the session, or straight to the
	// upstream, and reads the whole answer; took is from sending to the
	// last byte read, and answered adds the answer to the history with
	// "done" as the result of each tool call.
	send(ctx context.Context, through bool, body []byte) (took time.Duration, answered func(), err error)
}

// door is the door of that name.
func (s *System) door(name string) (door, error) {
	switch name {
	case DoorMessages:
		return messagesDoor{s}, nil
	case DoorResponses:
		return &responsesDoor{s: s}, nil
	}
	return nil, fmt.Errorf("benchmark: no door %q: want one of %s", name, strings.Join(Doors, ", "))
}

// messagesDoor is POST /v1/messages, in front of the System's Anthropic
// upstream.
type messagesDoor struct{ s *System }

func (d messagesDoor) build(id string, size int64) (doorSession, int) {
	c, rounds := builtConversation(id, size)
	return &messagesSession{s: d.s, id: id, c: c}, rounds
}

func (d messagesDoor) answer(final bool) func() []int64 {
	up := upstream.New(upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens,
		Script: func(*upstream.Request) (upstream.Reply, error) {
			if final {
				return upstream.Final(builtAnswer), nil
			}
			return upstream.Say(upstream.ToolUse("Task", map[string]any{"prompt": "keep going"})), nil
		}})
	d.s.UseUpstream(up)
	return inputSizes(up.Messages, func(c upstream.Call) int64 { return c.Usage.InputSide() })
}

// inputSizes reads the inputs of the calls an upstream answered, in order,
// as input measures each.
func inputSizes[C any](calls func() []C, input func(C) int64) func() []int64 {
	return func() []int64 {
		var sizes []int64
		for _, c := range calls() {
			sizes = append(sizes, input(c))
		}
		return sizes
	}
}

// messagesSession is a conversation of session id.
type messagesSession struct {
	s  *System
	id string
	c  *conversation
}

func (m *messagesSession) request() ([]byte, error) { return m.c.request() }

func (m *messagesSession) beforeAnswer(rounds int) ([]byte, error) {
	full := m.c.msgs
	defer func() { m.c.msgs = full }()
	m.c.msgs = full[:rounds*builtPerRound-1]
	return m.c.request()
}

func (m *messagesSession) ask(text string) {
	m.c.msgs = append(m.c.msgs, message{Role: "user", Content: []block{{"type": "text", "text": text}}})
}

func (m *messagesSession) send(ctx context.Context, through bool, body []byte) (time.Duration, func(), error) {
	base, session := m.s.Upstream, ""
	if through {
		base, session = m.s.API, m.id
	}
	a, took, err := post(ctx, base, session, body)
	return took, func() { m.c.answered(a, func(map[string]any) string { return "done" }) }, err
}

// ProxyTiming is one door of the proxy at one session size: rounds sent
// through Mnemos and the same requests sent straight to the upstream.
type ProxyTiming struct {
	// Door is the door timed (DoorMessages, DoorResponses).
	Door string
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
// Mnemos's door (DoorMessages, DoorResponses) and the same requests
// straight to the upstream, samples of each, interleaved. The sessions
// (proxySessions of them, taking turns) are conversations of requests,
// tool calls and their 3,200-byte results (builtConversation), stored
// through Mnemos by untimed rounds (prime) and warmed by one more; each
// sample is a round that answers the model's last tool call, as an agent's
// next request does, and the model calls the tool again.
func (s *System) ProxyLatency(ctx context.Context, doorName, run string, size int64, samples int) (ProxyTiming, error) {
	out := ProxyTiming{Door: doorName, Tokens: size}
	d, err := s.door(doorName)
	if err != nil {
		return out, err
	}
	sessions := make([]doorSession, min(samples, proxySessions))
	for i := range sessions {
		id := fmt.Sprintf("%s-%s%dk-%d", run, doorName, size/1000, i)
		if sessions[i], err = s.openSession(ctx, d, id, size); err != nil {
			return out, err
		}
	}
	measured := func(sizes []int64) {
		// The upstream saw each sample's two requests in the order sent.
		for i := 0; i+1 < len(sizes); i += 2 {
			if sizes[i] != sizes[i+1] {
				out.Differed++
			}
			for _, n := range sizes[i : i+2] {
				if out.Sent[0] == 0 || n < out.Sent[0] {
					out.Sent[0] = n
				}
				out.Sent[1] = max(out.Sent[1], n)
			}
		}
	}
	sizes := d.answer(false)
	cpu := sampleCPU()
	for i := range samples {
		if i > 0 && i%proxyBatch == 0 {
			measured(sizes())
			sizes = d.answer(false)
		}
		c := sessions[i%len(sessions)]
		body, err := c.request()
		if err != nil {
			return out, err
		}
		// Alternate which goes first, so that neither always finds the
		// other's work done (a collection, a cache warmed).
		var answered func()
		var through, straight time.Duration
		if i%2 == 0 {
			if through, answered, err = c.send(ctx, true, body); err == nil {
				straight, _, err = c.send(ctx, false, body)
			}
		} else {
			if straight, _, err = c.send(ctx, false, body); err == nil {
				through, answered, err = c.send(ctx, true, body)
			}
		}
		if err != nil {
			return out, err
		}
		answered()
		out.Through, out.Straight = append(out.Through, through), append(out.Straight, straight)
	}
	out.CPU, out.HasCPU = cpuSince(cpu)
	measured(sizes())
	return out, nil
}

// openSession builds session id of about size tokens at door d, stores it
// through Mnemos (prime) and warms it: one more round, a user's request,
// sent both ways, which the model answers with a call of the tool.
func (s *System) openSession(ctx context.Context, d door, id string, size int64) (doorSession, error) {
	c, rounds := d.build(id, size)
	stored, err := s.prime(ctx, d, id, c, rounds)
	if err != nil {
		return nil, err
	}
	d.answer(false)
	c.ask("Now make it read the file lazily.")
	body, err := c.request()
	if err != nil {
		return nil, err
	}
	_, answered, err := c.send(ctx, true, body)
	if err != nil {
		return nil, err
	}
	answered()
	if _, _, err := c.send(ctx, false, body); err != nil {
		return nil, err
	}
	if err := s.awaitRounds(ctx, id, stored+1); err != nil {
		return nil, err
	}
	return c, nil
}

// The rounds of a built conversation: a request, a call of a tool with its
// result, and the answer that ends the round.
const (
	builtAnswer   = "Found it; the loader reads the file once."
	builtPerRound = 4
	builtResult   = 3_200 // bytes of each tool result
)

// builtRequest is the user's request that begins each built round.
var builtRequest = strings.Repeat("Please keep going with the refactor. ", 11)

// builtOutput is the tool's result in built round n.
func builtOutput(n int) string {
	return strings.Repeat(fmt.Sprintf("result %d of the search. ", n), 200)[:builtResult]
}

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
		add("user", block{"type": "text", "text": builtRequest})
		add("assistant", block{"type": "text", "text": "Searching."},
			block{"type": "tool_use", "id": call, "name": "Task", "input": map[string]any{"description": "look around", "prompt": "find the config loader"}})
		add("user", block{"type": "tool_result", "tool_use_id": call, "content": builtOutput(rounds)})
		add("assistant", block{"type": "text", "text": builtAnswer})
	}
	return c, rounds
}

// primeResults is how many tool results one priming round adds: under the
// tool-result characters a turn may add before Mnemos offloads the largest
// (accounting.DefaultOffload's TurnCapChars, 200,000), as an agent's rounds
// would.
const primeResults = 150_000 / builtResult

// prime stores a built session of rounds rounds, id, through Mnemos's door
// d, by requests that each end before one of its answers, which the
// upstream then gives, each sent once the one before is applied; it
// returns how many requests it sent. Sent back to back, the last request
// would carry a hundred rounds the session has not stored, counted by the
// raw estimate in a session whose responses have taught it nothing yet (a
// tenant's first): 14% over what the upstream counts, past the
// auto-compact threshold, and the session would be compacted before it is
// measured.
func (s *System) prime(ctx context.Context, d door, id string, c doorSession, rounds int) (int64, error) {
	d.answer(true)
	var sent int64
	for done := 0; done < rounds; done += primeResults {
		body, err := c.beforeAnswer(min(done+primeResults, rounds))
		if err != nil {
			return sent, err
		}
		if _, _, err := c.send(ctx, true, body); err != nil {
			return sent, err
		}
		sent++
		if err := s.awaitRounds(ctx, id, sent); err != nil {
			return sent, err
		}
	}
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
	up := upstream.New(upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens, Latency: costLatency, Script: func(r *upstream.Request) (upstream.Reply, error) {
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

// costLatency is how long the cost sessions' model takes to answer: far
// less than a real one (seconds), but enough for the accountant to apply a
// round before the next one comes, as it does behind a real model. A model
// that answered at once would measure how far behind the accountant runs
// on a busy machine, not what the session costs.
const costLatency = 300 * time.Millisecond

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
