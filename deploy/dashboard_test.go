package deploy_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// declaredMetrics reads the instruments declared in the code and names
// them as Prometheus shows them: counters end in _total, histograms (all in
// seconds) in _seconds.
func declaredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(Int64Counter|Float64Counter|Float64Histogram|Int64ObservableGauge|Int64ObservableCounter)\("(mnemos\.[a-z0-9_.]+)"(.*)`)
	names := map[string]bool{}
	for _, dir := range []string{"pkg", "services"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			text := string(src)
			for _, at := range decl.FindAllStringSubmatchIndex(text, -1) {
				kind, declared, rest := text[at[2]:at[3]], text[at[4]:at[5]], text[at[6]:at[7]]
				name := strings.ReplaceAll(declared, ".", "_")
				// The whole declaration, its options on the lines after it too.
				stmt, _, _ := strings.Cut(text[at[0]:], "err != nil")
				switch kind {
				case "Int64Counter", "Float64Counter", "Int64ObservableCounter":
					names[name+"_total"] = true
				case "Float64Histogram":
					switch {
					case strings.HasSuffix(strings.TrimSpace(rest), ")") && !strings.Contains(rest, "WithUnit"):
						continue // the no-op fallback of an instrument declared above
					case strings.Contains(stmt, "WithUnit"):
						require.Contains(t, stmt, `metric.WithUnit("s")`, "%s: %s is a histogram in seconds, or has no unit", path, declared)
						names[name+"_seconds"] = true
					default:
						names[name] = true // a score without a unit
					}
				default:
					names[name] = true
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	return names
}

// TestDashboardQueriesKnownMetrics reads the Grafana dashboard: it picks its
// Prometheus with a datasource variable, and every metric it queries is one
// the code declares, and every instrument the code declares is shown.
func TestDashboardQueriesKnownMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/grafana/mnemos.json"))
	require.NoError(t, err)
	var dash struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query string `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.Equal(t, "mnemos", dash.UID)
	require.Len(t, dash.Templating.List, 1)
	require.Equal(t, "datasource", dash.Templating.List[0].Type)
	require.Equal(t, "prometheus", dash.Templating.List[0].Query)

	known := declaredMetrics(t)
	require.True(t, known["mnemos_bus_consumer_pending"], "the scan finds the code's instruments")
	known["http_server_request_duration_seconds"] = true // otelhttp's, on the gateway's routes
	series := regexp.MustCompile(`\b((?:mnemos|http_server)_[a-z0-9_]+)`)
	shown := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		require.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			for _, m := range series.FindAllString(tg.Expr, -1) {
				family := m
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if base := strings.TrimSuffix(m, suffix); base != m && known[base] {
						family = base // a histogram's series
					}
				}
				require.True(t, known[family], "panel %q queries %s, which nothing declares", p.Title, m)
				shown[family] = true
			}
		}
	}
	// Every instrument the code declares is on the dashboard.
	for name := range known {
		require.True(t, shown[name], "the dashboard shows %s", name)
	}
}
