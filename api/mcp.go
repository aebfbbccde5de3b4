package api

// The inputs of the tools of the MCP endpoint (/mcp, docs/mcp.md). The
// document does not describe them (MCP has its own protocol there): the
// MCP server derives each tool's input schema from these types, their
// json tags and their jsonschema tags, which say what the model reads.

// ToolResultInput is read_tool_result's input.
type ToolResultInput struct {
	ID     string `json:"id" jsonschema:"the tool result's id, as its preview names it"`
	Offset int    `json:"offset,omitempty" jsonschema:"the first character to return, counted from 0"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many characters to return (default 20000, at most 100000)"`
}

// SearchInput is search_past_context's input.
type SearchInput struct {
	Query   string `json:"query" jsonschema:"what to look for, in plain words; \"phrases\" must match, -word must not"`
	Scope   string `json:"scope,omitempty" jsonschema:"the memory scope to search (project:<id>, user:<id>, local:<id>, agent:<type>); by default the one the headers or the session name"`
	Session string `json:"session,omitempty" jsonschema:"search only this session's messages"`
	Limit   int    `json:"limit,omitempty" jsonschema:"the most hits to answer (default 10, at most 50)"`
}

// RecallInput is recall's input.
type RecallInput struct {
	Query       string   `json:"query" jsonschema:"what the user asked, or the task at hand, in plain words"`
	RecentTools []string `json:"recent_tools,omitempty" jsonschema:"the tools you have just used"`
}
