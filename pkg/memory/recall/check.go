package recall

import (
	"fmt"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// Bounds of a recall request's recent tools.
const (
	maxRecentTools = 64
	maxToolName    = 128
)

// CheckRequest returns what is wrong with a recall asked for from outside
// (the API's route, the MCP tool), or "": its query, the tools it names as
// used lately and the memory scope it names.
func CheckRequest(query string, recentTools []string, scope map[string]string) string {
	if strings.TrimSpace(query) == "" {
		return "query is empty: send what the user asked"
	}
	if len(recentTools) > maxRecentTools {
		return fmt.Sprintf("recent_tools lists %d tools, more than %d", len(recentTools), maxRecentTools)
	}
	for _, t := range recentTools {
		if strings.TrimSpace(t) == "" || len(t) > maxToolName || strings.ContainsAny(t, ",\n") {
			return fmt.Sprintf("recent_tools: %.40q is not a tool name (1 to %d bytes, no comma or newline)", t, maxToolName)
		}
	}
	for kind, scopeID := range scope {
		if _, err := memory.NewScope(memory.Kind(kind), scopeID); err != nil {
			return "memory_scope: " + err.Error()
		}
	}
	return ""
}
