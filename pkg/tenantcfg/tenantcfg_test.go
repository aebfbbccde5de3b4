package tenantcfg_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
)

var defaults = tenantcfg.Defaults()

func TestOverlayChangesOnlyWhatIsNamed(t *testing.T) {
	t.Parallel()
	s, err := tenantcfg.Overlay(defaults, []byte(`{"tokens": {"auto_compact_percent": 80}, "offload": {"threshold_chars": 20000}}`))
	require.NoError(t, err)
	want := defaults
	want.Tokens.AutoCompactPercent = 80
	want.Offload.ThresholdChars = 20_000
	require.Equal(t, want, s)

	s, err = tenantcfg.Overlay(defaults, []byte(`{"compaction": {"min_retention": 0.75}}`))
	require.NoError(t, err)
	require.Zero(t, defaults.Compaction.MinRetention, "off by default")
	require.Equal(t, 0.75, s.Compaction.MinRetention)

	for _, empty := range []string{"", "  ", "{}"} {
		s, err := tenantcfg.Overlay(defaults, []byte(empty))
		require.NoError(t, err)
		require.Equal(t, defaults, s, "%q keeps the defaults", empty)
	}
}

// TestOverlayOverridesModelWindows: a tenant overrides the model table's
// window for OpenAI and Claude families alike, and one tenant's overrides
// never reach another's settings.
func TestOverlayOverridesModelWindows(t *testing.T) {
	t.Parallel()
	acme, err := tenantcfg.Overlay(defaults, []byte(`{"tokens": {"models": {"gpt-5": {"window": 400000}, "claude-opus-4-6": {"window": 150000}}}}`))
	require.NoError(t, err)
	require.Equal(t, int64(400_000), acme.Tokens.Limits("gpt-5-codex", 0, 0).Window)
	require.Equal(t, int64(150_000), acme.Tokens.Limits("claude-opus-4-6", 0, 0).Window)
	require.Equal(t, int64(1_047_576), acme.Tokens.Limits("gpt-4.1", 0, 0).Window, "a family not named keeps the table's")

	withDefaults := defaults
	withDefaults.Tokens.Models = map[string]tokens.ModelOverride{"o3": {Window: 150_000}}
	globex, err := tenantcfg.Overlay(withDefaults, []byte(`{"tokens": {"models": {"gpt-4o": {"max_output": 4096}}}}`))
	require.NoError(t, err)
	require.Equal(t, int64(150_000), globex.Tokens.Limits("o3", 0, 0).Window, "the process's overrides stay under the tenant's")
	require.Equal(t, int64(4_096), globex.Tokens.Limits("gpt-4o", 0, 0).Reserve)
	require.NotContains(t, withDefaults.Tokens.Models, "gpt-4o", "a tenant's override never reaches the defaults")
	require.Equal(t, int64(272_000), defaults.Tokens.Limits("gpt-5", 0, 0).Window)

	_, err = tenantcfg.Overlay(defaults, []byte(`{"tokens": {"models": {"gpt-4o": {"window": 20000}}}}`))
	require.ErrorContains(t, err, `models["gpt-4o"]`)
	_, err = tenantcfg.Overlay(defaults, []byte(`{"tokens": {"models": {"gpt-4o": {"windw": 200000}}}}`))
	require.ErrorContains(t, err, `unknown field "windw"`)
}

func TestOverlayRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		`{"tokens": {"auto_compact_prcent": 80}}`:           "unknown field",
		`{"tokens": {"auto_compact_percent": 180}}`:         "auto_compact_percent",
		`{"offload": {"preview_bytes": 90000}}`:             "preview_bytes",
		`{"tokens": {"default_window": 1000}}`:              "default_window",
		`{"memory": {"index_max_lines": 0}}`:                "index_max_lines",
		`{"memory": {"index_line_max_chars": 100}}`:         "index_line_max_chars",
		`{"tokens": {"warning_buffer": "twenty thousand"}}`: "cannot unmarshal",
		`[1, 2]`:                                "cannot unmarshal",
		`{"limits": {"events_per_second": -5}}`: "events_per_second",
		`{"limits": {"events_burst": 0}}`:       "events_burst",
		`{"limits": {"active_sessions": 10, "active_minutes": 0}}`:                                         "active_minutes",
		`{"compaction": {"min_retention": 1.5}}`:                                                           "min_retention",
		`{"proxy": {"exact_count_within_percent": 101}}`:                                                   "exact_count_within_percent",
		`{"proxy": {"preflight_exact_percent": -1}}`:                                                       "preflight_exact_percent",
		`{"compaction": {"min_retention": -0.1}}`:                                                          "min_retention",
		`{"llm": {"daily_budget_usd": -1}}`:                                                                "negative",
		`{"llm": {"daily_budget_usd": 0.0000000001}}`:                                                      "more than 9 decimals",
		`{"llm": {"prices": {"claude-sonnet-4-5": {"input": 2}}}}`:                                         "names no cache_read, cache_write, output",
		`{"llm": {"prices": {"m": {"input": 1, "output": 1, "cache_write": 1, "cache_read": -1}}}}`:        "negative",
		`{"llm": {"prices": {"m": {"input": 1, "output": 1, "cache_write": 1, "cache_read": 1, "x": 1}}}}`: "unknown field",
		`{"llm": {"prices": {"": {"input": 1, "output": 1, "cache_write": 1, "cache_read": 1}}}}`:          "names no model",
	} {
		_, err := tenantcfg.Overlay(defaults, []byte(doc))
		require.ErrorContains(t, err, want, doc)
	}
}

func TestOverlayReadsMoneyExactly(t *testing.T) {
	t.Parallel()
	s, err := tenantcfg.Overlay(defaults, []byte(`{"llm": {"daily_budget_usd": 2.5, "prices": {"claude-sonnet-4-5": {"input": 2.4, "output": 12, "cache_write": 3, "cache_read": 0.24}}}}`))
	require.NoError(t, err)
	require.Equal(t, 2*llm.Dollar+llm.Dollar/2, s.LLM.DailyBudgetUSD)
	p, ok := s.LLM.Prices.Lookup("claude-sonnet-4-5-20250929")
	require.True(t, ok)
	require.Equal(t, llm.Price{Input: 2_400, Output: 12_000, CacheWrite: 3_000, CacheRead: 240}, p)
	require.Nil(t, defaults.LLM.Prices, "a tenant's prices do not leak into the defaults")
}

func TestCacheReadsOncePerTTL(t *testing.T) {
	t.Parallel()
	reads := 0
	doc := `{"tokens": {"auto_compact_percent": 50}}`
	c, err := tenantcfg.NewCache(defaults, func(_ context.Context, tenant string) ([]byte, error) {
		reads++
		if tenant == "ghost" {
			return nil, errors.New("no such tenant")
		}
		return []byte(doc), nil
	}, time.Hour)
	require.NoError(t, err)
	for range 3 {
		s, err := c.For(context.Background(), "acme")
		require.NoError(t, err)
		require.InDelta(t, 50, s.Tokens.AutoCompactPercent, 0)
	}
	require.Equal(t, 1, reads)
	_, err = c.For(context.Background(), "ghost")
	require.ErrorContains(t, err, "no such tenant")
}

func TestSessionMemorySettings(t *testing.T) {
	t.Parallel()
	require.Equal(t, tenantcfg.SessionMemory{
		Enabled: true, InitTokens: 10_000, UpdateTokens: 5_000, UpdateToolCalls: 3, SectionTokens: 2_000, TotalTokens: 12_000,
	}, defaults.SessionMemory, "the design's numbers")
	require.Equal(t, 15, defaults.Compaction.SessionMemory.WaitSeconds)
	require.Equal(t, sessionnotes.DefaultTemplate, defaults.SessionMemory.TemplateText())

	own := strings.Replace(sessionnotes.DefaultTemplate, "# Workflow\n_", "# Workflow\n_Our own words: _", 1)
	doc, err := json.Marshal(map[string]any{"session_memory": map[string]any{
		"init_tokens": 2000, "template": own, "prompt": "Keep it under {{max_total_tokens}} tokens.",
	}})
	require.NoError(t, err)
	s, err := tenantcfg.Overlay(defaults, doc)
	require.NoError(t, err)
	require.EqualValues(t, 2000, s.SessionMemory.InitTokens)
	require.EqualValues(t, 5000, s.SessionMemory.UpdateTokens, "what the tenant did not name keeps its default")
	require.Equal(t, own, s.SessionMemory.TemplateText())

	broken := strings.Replace(sessionnotes.DefaultTemplate, "# Learnings\n", "# Lessons\n", 1)
	for name, settings := range map[string]map[string]any{
		"template without the fixed headings": {"session_memory": map[string]any{"template": broken}},
		"prompt with an unknown variable":     {"session_memory": map[string]any{"prompt": "Here are the notes: {{notes}}"}},
		"section over the total":              {"session_memory": map[string]any{"section_tokens": 20_000}},
		"negative step":                       {"session_memory": map[string]any{"update_tokens": -1}},
		"wait too long":                       {"compaction": map[string]any{"session_memory": map[string]any{"wait_seconds": 600}}},
	} {
		doc, err := json.Marshal(settings)
		require.NoError(t, err)
		_, err = tenantcfg.Overlay(defaults, doc)
		require.Error(t, err, name)
	}
}

func TestExtractionSettings(t *testing.T) {
	t.Parallel()
	e := defaults.Extraction
	require.Equal(t, tenantcfg.Extraction{Enabled: true, EveryTurns: 1, MaxTurns: 5,
		WriteScope: tenantcfg.ScopeKinds{memory.KindProject, memory.KindUser, memory.KindLocal, memory.KindAgent}}, e, "the design's numbers")

	for _, c := range []struct {
		name  string
		scope map[string]string
		want  string
	}{
		{"project first", map[string]string{"user": "u-42", "project": "repo-x", "local": "u-42-repo-x"}, "project:repo-x"},
		{"else user", map[string]string{"user": "u-42", "agent": "reviewer"}, "user:u-42"},
		{"else local", map[string]string{"local": "u-42-repo-x", "agent": "reviewer"}, "local:u-42-repo-x"},
		{"else agent", map[string]string{"agent": "reviewer"}, "agent:reviewer"},
		{"an invalid id is no scope", map[string]string{"project": "../etc", "user": "u-42"}, "user:u-42"},
		{"none", map[string]string{"team": "t-1"}, ""},
		{"no memory_scope", nil, ""},
	} {
		s, ok := e.Scope(c.scope)
		require.Equal(t, c.want != "", ok, c.name)
		if ok {
			require.Equal(t, c.want, s.String(), c.name)
		}
	}

	s, err := tenantcfg.Overlay(defaults, []byte(`{"extraction": {"every_turns": 3, "write_scope": ["user", "project"]}}`))
	require.NoError(t, err)
	require.Equal(t, 3, s.Extraction.EveryTurns)
	require.Equal(t, tenantcfg.ScopeKinds{memory.KindUser, memory.KindProject}, s.Extraction.WriteScope, "the list replaces the default")
	require.Equal(t, tenantcfg.DefaultExtraction().WriteScope, defaults.Extraction.WriteScope, "the defaults are untouched")
	require.True(t, s.Extraction.Enabled, "what the tenant did not name keeps its default")
	sc, ok := s.Extraction.Scope(map[string]string{"user": "u-42", "project": "repo-x"})
	require.True(t, ok)
	require.Equal(t, "user:u-42", sc.String(), "the tenant's order")
	_, ok = s.Extraction.Scope(map[string]string{"local": "l-1"})
	require.False(t, ok, "kinds the tenant left out are never written")

	for doc, want := range map[string]string{
		`{"extraction": {"every_turns": 0}}`:                "every_turns",
		`{"extraction": {"max_turns": 6}}`:                  "max_turns",
		`{"extraction": {"max_turns": 0}}`:                  "max_turns",
		`{"extraction": {"write_scope": []}}`:               "write_scope",
		`{"extraction": {"write_scope": ["team"]}}`:         `"team" is not a scope kind`,
		`{"extraction": {"write_scope": ["user", "user"]}}`: "named twice",
		`{"extraction": {"every_turn": 2}}`:                 "unknown field",
	} {
		_, err := tenantcfg.Overlay(defaults, []byte(doc))
		require.ErrorContains(t, err, want, doc)
	}
}

func TestDreamingSettings(t *testing.T) {
	t.Parallel()
	d := defaults.Dreaming
	require.True(t, d.Enabled)
	require.Equal(t, 24*time.Hour, d.MinInterval(), "the design's numbers")
	require.Equal(t, 5, d.MinSessions)
	require.Equal(t, 10*time.Minute, d.ScanInterval())
	require.Equal(t, time.Hour, d.LeaseStale())
	require.Equal(t, 2, d.AllowedChanges(10), "20% of 10")
	require.Equal(t, 1, d.AllowedChanges(9), "rounded down")
	require.Equal(t, 1, d.AllowedChanges(4), "at least one of a scope with memories: 20% of 4 is 0.8")
	require.Equal(t, 1, d.AllowedChanges(1))
	require.Equal(t, 0, d.AllowedChanges(0), "nothing to change")
	off := d
	off.MaxChangePercent = 0
	require.Equal(t, 0, off.AllowedChanges(4), "0% keeps every change for approval")
	require.Equal(t, 50, d.SearchMaxHits)

	s, err := tenantcfg.Overlay(defaults, []byte(`{"dreaming": {"min_hours": 0.5, "lease_stale_seconds": 2, "max_change_percent": 50}}`))
	require.NoError(t, err)
	require.Equal(t, 30*time.Minute, s.Dreaming.MinInterval())
	require.Equal(t, 2*time.Second, s.Dreaming.LeaseStale())
	require.Equal(t, 5, s.Dreaming.AllowedChanges(10))
	require.Equal(t, 5, s.Dreaming.MinSessions, "what the tenant did not name keeps its default")

	for doc, want := range map[string]string{
		`{"dreaming": {"min_sessions": -1}}`:        "min_sessions",
		`{"dreaming": {"lease_stale_seconds": 0}}`:  "lease_stale_seconds",
		`{"dreaming": {"max_change_percent": 120}}`: "max_change_percent",
		`{"dreaming": {"search_max_hits": 500}}`:    "search_max_hits",
		`{"dreaming": {"max_turns": 0}}`:            "max_turns",
		`{"dreaming": {"snippet_words": 1000}}`:     "snippet_words",
		`{"dreaming": {"scan_every_seconds": 10}}`:  "unknown field",
	} {
		_, err := tenantcfg.Overlay(defaults, []byte(doc))
		require.ErrorContains(t, err, want, doc)
	}
}

func TestRetentionSettings(t *testing.T) {
	t.Parallel()
	require.False(t, defaults.Retention.On(), "retention is off by default")
	s, err := tenantcfg.Overlay(defaults, []byte(`{"retention": {"sessions_idle_days": 30, "memory_revisions_days": 90, "memory_revisions_keep": 5}}`))
	require.NoError(t, err)
	require.Equal(t, tenantcfg.Retention{SessionsIdleDays: 30, MemoryRevisionsDays: 90, MemoryRevisionsKeep: 5}, s.Retention)
	require.True(t, s.Retention.On())

	for doc, want := range map[string]string{
		`{"retention": {"sessions_idle_days": -1}}`:                                "sessions_idle_days must be 0 (off) to 36500 days, got -1",
		`{"retention": {"tool_results_days": 40000}}`:                              "tool_results_days must be 0 (off) to 36500 days, got 40000",
		`{"retention": {"memory_revisions_days": 7, "memory_revisions_keep": -2}}`: "memory_revisions_keep must be 0 to 10000, got -2",
		`{"retention": {"memory_revisions_keep": 3}}`:                              "memory_revisions_keep (3) needs memory_revisions_days",
		`{"retention": {"session_idle_days": 3}}`:                                  `unknown field "session_idle_days"`,
		`{"retention": {"tool_results_days": "30d"}}`:                              "cannot unmarshal",
	} {
		_, err := tenantcfg.Overlay(defaults, []byte(doc))
		require.ErrorContains(t, err, want, doc)
	}
}
