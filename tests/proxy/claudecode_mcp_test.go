package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/claudecli"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

// The CLI's names of Mnemos's MCP tools, for the server named "mnemos" in
// its --mcp-config.
const (
	memoryTool     = "mcp__mnemos__memory"
	toolResultTool = "mcp__mnemos__read_tool_result"
)

// ledgerEnd closes the ledger, far past the first 2,000 bytes an offloaded
// result's preview keeps: only the stored result holds it.
const ledgerEnd = "closing balance 48213.07 LEDGER-END-MARK"

// ledger is a file the CLI reads whole and Mnemos offloads: over 50,000
// characters of entries, then ledgerEnd.
func ledger() string {
	var b strings.Builder
	b.WriteString("ledger of the harbour office, all entries in euros\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "entry %04d account %03d debit %7d credit %7d ref L%05d\n", i, (i*31)%400, (i*577)%90000, (i*211)%70000, i*7)
	}
	b.WriteString(ledgerEnd + "\n")
	return b.String()
}

// The memory the model saves over MCP.
const (
	memoryName = "ledger-closing-check"
	memoryBody = "Check the ledger's closing balance against the bank statement before filing it."
	mcpAnswer  = "The ledger closes at 48213.07; the check is in the project's memory."
)

// preview finds the id and size an offloaded result's preview names.
var preview = regexp.MustCompile(`This tool result was (\d+) characters.*stored as tool result ([A-Za-z0-9_-]+) `)

// TestClaudeCodeUsesMnemosOverMCP runs the real CLI through Mnemos with
// Mnemos's /mcp as an MCP server (--mcp-config with the tenant's key in a
// header, as docs/mcp.md shows). The scripted model reads a large file,
// which Mnemos offloads; saves a memory file and views it with the memory
// tool; then reads the end of the offloaded result with read_tool_result,
// by the id the preview in its context names. The memory is in Mnemos,
// and the model got the offloaded text back.
func TestClaudeCodeUsesMnemosOverMCP(t *testing.T) {
	claudecli.Bin(t) // skips, naming the variable, when the CLI is not installed
	t.Parallel()

	up := upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens})
	m := startMnemos(t, up.URL, claudecli.APIKey)
	s := claudecli.NewSession(t, m.api.URL)
	require.NoError(t, s.WriteFile("ledger.txt", ledger()))
	config, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"mnemos": map[string]any{
		"type": "http", "url": m.api.URL + "/mcp",
		"headers": map[string]string{"Authorization": "Bearer ${MNEMOS_API_KEY}", "X-Mnemos-Project": project},
	}}})
	require.NoError(t, err)
	require.NoError(t, s.WriteFile("mnemos-mcp.json", string(config)))
	// The config's ${MNEMOS_API_KEY} is the CLI's to expand. Without tool
	// search the MCP tools are offered on every call, not deferred behind
	// the CLI's ToolSearch tool, which the script would have to drive
	// (its tool_reference results are kept as sent: TestBlocksOfOtherTypes
	// and TestARoundWithBlocksOfOtherTypesIsRecorded).
	s.Env = append(s.Env, "MNEMOS_API_KEY="+claudecli.APIKey, "ENABLE_TOOL_SEARCH=false")
	up.SetScript(mcpScript(s.Work, pgtest.Admin(t, m.store)))

	runCLI(t, s, claudecli.Run{
		Prompt:    "Read ledger.txt, note for later how its closing balance is to be checked, and tell me the closing balance.",
		Tools:     []string{"Read", memoryTool, toolResultTool},
		MCPConfig: filepath.Join(s.Work, "mnemos-mcp.json"),
	}, mcpAnswer)
	for i, c := range up.Calls() {
		require.NoError(t, c.Err, "call %d", i+1)
	}

	// The memory file is in the project's memory, as the model wrote it.
	// The CLI sends no session header to an MCP server, so the write is the
	// API's, not the session's (docs/mcp.md).
	memory := m.api.URL + "/v1/scopes/project:" + project + "/memories/" + memoryName
	var saved struct{ Markdown string }
	getJSON(t, memory, claudecli.APIKey, &saved)
	require.Contains(t, saved.Markdown, memoryBody)
	var revs struct {
		Revisions []struct {
			Actor     string
			SessionID string `json:"session_id"`
		}
	}
	getJSON(t, memory+"/revisions", claudecli.APIKey, &revs)
	require.Len(t, revs.Revisions, 1)
	require.Equal(t, "api", revs.Revisions[0].Actor)
	require.Empty(t, revs.Revisions[0].SessionID)

	calls := up.Messages()
	viewed := toolResults(calls[len(calls)-2].Request.Last())
	require.Len(t, viewed, 1)
	require.Contains(t, viewed[0], memoryBody, "the memory tool's view showed the file")

	// The model found the preview in its context and read the end of the
	// offloaded result by its id.
	var previewed []string
	for _, c := range calls {
		for _, msg := range c.Request.Messages {
			if p := preview.FindStringSubmatch(string(msg.Content)); p != nil {
				previewed = append(previewed, p[2])
			}
		}
	}
	require.NotEmpty(t, previewed, "a request carried the offloaded result's preview")
	read := toolResults(calls[len(calls)-1].Request.Last())
	require.Len(t, read, 1)
	require.Contains(t, read[0], "Tool result "+previewed[0], "read_tool_result answered the previewed result")
	require.Contains(t, read[0], ledgerEnd, "the tool result of read_tool_result holds the offloaded text")
}

// mcpScript scripts the model: read the ledger; save a memory file; view
// it; read the end of the offloaded ledger by the id its preview names;
// answer. Each step follows from the tool the model called last.
func mcpScript(work string, admin *pgxpool.Pool) upstream.Script {
	return func(r *upstream.Request) (upstream.Reply, error) {
		if !slices.Contains(r.ToolNames(), memoryTool) || !slices.Contains(r.ToolNames(), toolResultTool) {
			return upstream.Reply{}, fmt.Errorf("the call offers no Mnemos MCP tools: %v", r.ToolNames())
		}
		name, input := lastToolUse(r)
		switch {
		case name == "":
			return upstream.Say(upstream.ToolUse("Read", map[string]any{"file_path": filepath.Join(work, "ledger.txt")})), nil
		case name == "Read":
			doc := "---\nname: " + memoryName + "\ndescription: How the ledger's closing balance is checked\ntype: project\n---\n\n" + memoryBody + "\n"
			return upstream.Say(upstream.ToolUse(memoryTool, map[string]any{
				"command": "create", "path": "/memories/" + memoryName + ".md", "file_text": doc,
			})), nil
		case name == memoryTool && input["command"] == "create":
			// The ledger's round is offloaded once the accountant applies
			// it; the next call's context then shows its preview.
			if err := awaitOffload(admin); err != nil {
				return upstream.Reply{}, err
			}
			return upstream.Say(upstream.ToolUse(memoryTool, map[string]any{"command": "view", "path": "/memories/" + memoryName + ".md"})), nil
		case name == memoryTool:
			for _, m := range r.Messages {
				if p := preview.FindStringSubmatch(string(m.Content)); p != nil {
					size, _ := strconv.Atoi(p[1])
					return upstream.Say(upstream.ToolUse(toolResultTool, map[string]any{"id": p[2], "offset": max(size-500, 0)})), nil
				}
			}
			return upstream.Reply{}, errors.New("no offloaded result's preview in the context")
		case name == toolResultTool:
			return upstream.Final(mcpAnswer), nil
		}
		return upstream.Reply{}, fmt.Errorf("the script has no step after %s", name)
	}
}

// lastToolUse is the tool the model called in its last answer and the
// input it gave ("" when the call starts a user turn).
func lastToolUse(r *upstream.Request) (string, map[string]any) {
	if len(r.Messages) < 2 || !r.Last().IsToolResult() {
		return "", nil
	}
	for _, b := range r.Messages[len(r.Messages)-2].Blocks() {
		if b.Type == "tool_use" {
			var input map[string]any
			_ = json.Unmarshal(b.Input, &input) // an input that is no object has no command
			return b.Name, input
		}
	}
	return "", nil
}

// toolResults are the texts of a message's tool results.
func toolResults(m upstream.Message) []string {
	var out []string
	for _, b := range m.Blocks() {
		if b.Type == "tool_result" {
			out = append(out, string(b.Content))
		}
	}
	return out
}

// awaitOffload waits until Mnemos has stored a tool result whole.
func awaitOffload(admin *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM tool_results").Scan(&n); err != nil {
			return fmt.Errorf("no tool result offloaded: %w", err)
		}
		if n > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no tool result offloaded: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
