package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// configRows runs `mnemos config args...` and returns its rows by variable:
// value and origin.
func configRows(t *testing.T, vars map[string]string, args ...string) (map[string][2]string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"config"}, args...), env(vars), &out, &out)
	rows := map[string][2]string{}
	row := regexp.MustCompile(`^(\S+)\s+(.*?)\s{2,}(default|environment.*)$`)
	for i, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		if i == 0 {
			require.Regexp(t, `^VARIABLE\s+VALUE\s+FROM$`, line)
			continue
		}
		m := row.FindStringSubmatch(line)
		require.NotNil(t, m, "a row of mnemos config: %q", line)
		rows[m[1]] = [2]string{m[2], m[3]}
	}
	return rows, err
}

// TestConfigCommandShowsTheEffectiveConfiguration: `mnemos config` lists
// every variable with its value and origin, and no secret.
func TestConfigCommandShowsTheEffectiveConfiguration(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		"MNEMOS_HTTP_ADDR":            "127.0.0.1:9999",
		"MNEMOS_DATABASE_URL":         "postgres://svc:s3cret-db@db:5432/mnemos?sslmode=disable",
		"MNEMOS_MIGRATE_DATABASE_URL": "postgres://owner@db:5432/mnemos?password=s3cret-owner",
		"MNEMOS_NATS_URL":             "nats://mnemos:s3cret-nats@nats:4222",
		"MNEMOS_ANTHROPIC_API_KEY":    "sk-ant-s3cret-key",
		"OPENAI_API_KEY":              "sk-s3cret-openai",
		"OTEL_EXPORTER_OTLP_HEADERS":  "authorization=Bearer s3cret-token",
		"MNEMOS_DEV_API_KEY":          "s3cret-dev",
		"MNEMOS_COMPACTOR_WORKERS":    "9",
	}
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"config"}, env(vars), &out, &out))
	require.NotContains(t, out.String(), "s3cret", "no secret is shown")

	rows, err := configRows(t, vars)
	require.NoError(t, err)
	require.Len(t, rows, len(configTable), "-target=all shows every variable")
	for name, want := range map[string][2]string{
		"MNEMOS_HTTP_ADDR":             {"127.0.0.1:9999", "environment"},
		"MNEMOS_GAP_TIMEOUT":           {"30s", "default"},
		"MNEMOS_COMPACTOR_WORKERS":     {"9", "environment"},
		"MNEMOS_COMPACTOR_MAX_DELIVER": {"8", "default"},
		"MNEMOS_DATABASE_URL":          {"postgres://svc:xxxxx@db:5432/mnemos?sslmode=disable", "environment"},
		"MNEMOS_MIGRATE_DATABASE_URL":  {"postgres://owner@db:5432/mnemos?password=xxxxx", "environment"},
		"MNEMOS_MIGRATE":               {"true", "default"},
		"MNEMOS_NATS_URL":              {"nats://mnemos:xxxxx@nats:4222", "environment"},
		"ANTHROPIC_API_KEY":            {"sk-a****", "environment (MNEMOS_ANTHROPIC_API_KEY)"},
		"OPENAI_API_KEY":               {"sk-s****", "environment"},
		"OTEL_EXPORTER_OTLP_HEADERS":   {"auth****", "environment"},
		"MNEMOS_DEV_API_KEY":           {"s3cr****", "environment"},
		"MNEMOS_LLM_PROVIDER":          {"anthropic", "default"},
		"OTEL_SERVICE_NAME":            {"mnemos", "default"},
		"MNEMOS_NAMESPACE":             {"(empty)", "default"},
	} {
		require.Equal(t, want, rows[name], name)
	}

	// One target: its own variables only.
	rows, err = configRows(t, map[string]string{"MNEMOS_NATS_URL": "nats://nats:4222", "MNEMOS_DEV_API_KEY": "off"}, "-target=compactor")
	require.NoError(t, err)
	require.Contains(t, rows, "MNEMOS_COMPACTOR_WORKERS")
	require.Contains(t, rows, "MNEMOS_LLM_MODEL_COMPACTION")
	require.Contains(t, rows, "MNEMOS_DATABASE_URL")
	require.NotContains(t, rows, "MNEMOS_DEV_API_KEY", "the development tenant is -target=all's")
	require.NotContains(t, rows, "MNEMOS_RECALL_WORKERS")
	require.Equal(t, [2]string{"mnemos-compactor", "default"}, rows["OTEL_SERVICE_NAME"])

	// A refused value is shown as given, and the refusals follow.
	rows, err = configRows(t, map[string]string{"MNEMOS_WORKERS": "-3", "MNEMOS_DEV_API_KEY": "off"}, "-target=all")
	require.ErrorContains(t, err, `MNEMOS_WORKERS="-3": want a positive integer`)
	require.Equal(t, [2]string{"-3", "environment, refused"}, rows["MNEMOS_WORKERS"])
	require.Equal(t, [2]string{"off", "environment"}, rows["MNEMOS_DEV_API_KEY"])
	_, err = configRows(t, nil, "-target=gateway")
	require.ErrorContains(t, err, "MNEMOS_NATS_URL is required for -target=gateway")

	require.ErrorContains(t, run(context.Background(), []string{"config", "-target=nonsense"}, env(nil), &out, &out), "unknown target")
	require.ErrorContains(t, run(context.Background(), []string{"config", "extra"}, env(nil), &out, &out), "unexpected argument")
}

// TestConfigurationPageIsGenerated: the table of docs/configuration.md is
// what configTable generates, and the page's own prose is outside it.
func TestConfigurationPageIsGenerated(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "configuration.md"))
	require.NoError(t, err)
	page := string(raw)
	begin, end, err := generatedSpan(page, markdownBegin)
	require.NoError(t, err, "docs/configuration.md")
	if got, want := page[begin:end], configMarkdown(); got != want {
		gotLines, wantLines := strings.Split(got, "\n"), strings.Split(want, "\n")
		i := 0
		for i < min(len(gotLines), len(wantLines)) && gotLines[i] == wantLines[i] {
			i++
		}
		line := func(lines []string) string {
			if i < len(lines) {
				return lines[i]
			}
			return "(the end)"
		}
		t.Fatalf("docs/configuration.md is not what configTable (cmd/mnemos/configtable.go) generates: run `make docs` and commit the page.\nFirst difference, line %d of the table:\n  page:  %s\n  table: %s",
			i+1, line(gotLines), line(wantLines))
	}
	require.Contains(t, page[end:], "\n## Limits\n", "the Limits section (linked as configuration.md#limits) is the page's own, after the table")

	// The markers are required, and updating writes only between them.
	_, err = spliceGenerated("# A page\n", markdownBegin, "| x |\n")
	require.ErrorContains(t, err, "between the lines")
	spliced, err := spliceGenerated("intro\n"+markdownBegin+"stale\n"+markdownEnd+"outro\n", markdownBegin, "fresh\n")
	require.NoError(t, err)
	require.Equal(t, "intro\n"+markdownBegin+"fresh\n"+markdownEnd+"outro\n", spliced)
}
