package compaction

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// What a compaction restores besides files and the todo list: the agent's
// latest plan and the skills it loaded. Instruction files (CLAUDE.md and
// its kin) and plan files are never restored as files: the client sends
// its instruction files with every request anyway, and a plan file's
// content is the plan, restored as the plan.

// Tools whose calls carry a plan or load a skill, as Claude Code names
// them.
const (
	planTool  = "ExitPlanMode"
	skillTool = "Skill"
)

// instructionFiles are the base names of the files agents read as
// standing instructions.
var instructionFiles = map[string]bool{
	"claude.md": true, "claude.local.md": true, "agents.md": true, "agent.md": true, "gemini.md": true,
	".cursorrules": true, ".windsurfrules": true, "copilot-instructions.md": true,
}

// neverRestored reports whether a file read is left out of what a
// compaction restores: an instruction file, or a plan file (a markdown file
// in a plans directory).
func neverRestored(p string) bool {
	clean := strings.ToLower(path.Clean(strings.ReplaceAll(p, `\`, "/")))
	if instructionFiles[path.Base(clean)] {
		return true
	}
	return strings.HasSuffix(clean, ".md") && (strings.Contains(clean, "/plans/") || strings.HasPrefix(clean, "plans/"))
}

// planOf is the plan a plan tool call carries ("" when none).
func planOf(b turn.Block) string {
	var in struct {
		Plan string `json:"plan"`
	}
	if json.Unmarshal(b.Input, &in) != nil {
		return ""
	}
	return strings.TrimSpace(in.Plan)
}

// skillOf is the name of the skill a skill tool call loads ("" when none).
func skillOf(b turn.Block) string {
	var in struct {
		Skill   string `json:"skill"`
		Command string `json:"command"`
		Name    string `json:"name"`
	}
	if json.Unmarshal(b.Input, &in) != nil {
		return ""
	}
	for _, s := range []string{in.Skill, in.Command, in.Name} {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}

// renderPlan is the restored block of the latest plan, cut to limit bytes.
func renderPlan(plan string, limit int) string {
	return "<restored-plan>\nThe plan the agent last set out:\n" + Clip(plan, limit) + "\n</restored-plan>"
}

// renderSkill is the restored block of a loaded skill, cut to limit bytes.
func renderSkill(name, body string, limit int) string {
	return fmt.Sprintf("<restored-skill name=\"%s\">\nThe skill was loaded before the compaction; its instructions still apply:\n%s\n</restored-skill>",
		attrEscape(name), Clip(body, limit))
}
