// Package deploy_test checks the deployment artefacts of deploy/ and the
// repository root: docker-compose.yml (with deploy/prometheus), the Helm
// chart (rendered, then validated against the Kubernetes schemas) and the
// Grafana dashboard. What they are checked against comes from the code: the
// targets and configuration variables from the binary (deploy-facts), the
// metrics from the instruments declared in pkg/ and services/.
package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	composecli "github.com/compose-spec/compose-go/v2/cli"
	composetypes "github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/mnemos-ai/mnemos/pkg/bus"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = ".."

// binaryFacts is what the binary says of itself (cmd/mnemos/deployfacts.go):
// the targets that run as their own process, and the environment variables
// its configuration reader reads. It is asked once per test process.
var binaryFacts = sync.OnceValues(func() (facts struct{ Targets, Env []string }, err error) {
	cmd := exec.Command("go", "run", "-tags", "deployfacts", "./cmd/mnemos", "deploy-facts")
	cmd.Dir = repoRoot
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return facts, fmt.Errorf("go run -tags deployfacts ./cmd/mnemos deploy-facts: %w: %s", err, stderr.String())
	}
	err = json.Unmarshal(stdout.Bytes(), &facts)
	return facts, err
})

// requireKnownEnv checks that every variable meant for the binary is one its
// configuration reader reads. Variables of other programs (the Go runtime's
// GOMEMLIMIT, the pod's own name) are not the binary's.
func requireKnownEnv(t *testing.T, where string, names []string) {
	t.Helper()
	facts, err := binaryFacts()
	require.NoError(t, err)
	for _, n := range names {
		ours := strings.HasPrefix(n, "MNEMOS_") || strings.HasPrefix(n, "OTEL_") || strings.HasSuffix(n, "_API_KEY")
		if ours {
			require.True(t, slices.Contains(facts.Env, n), "%s sets %s, which the configuration table (cmd/mnemos/configtable.go) does not hold", where, n)
		}
	}
}

// servedTargets are the targets that run as their own process.
func servedTargets(t *testing.T) []string {
	t.Helper()
	facts, err := binaryFacts()
	require.NoError(t, err)
	require.NotEmpty(t, facts.Targets)
	return facts.Targets
}

// ---------------------------------------------------------------------------
// docker compose

// loadCompose loads docker-compose.yml the way docker compose does (the
// compose-spec loader the docker CLI is built on): validated against the
// Compose schema, anchors merged, variables interpolated with their
// defaults, references between services checked.
func loadCompose(t *testing.T) *composetypes.Project {
	t.Helper()
	p, err := loadComposeFile(t, filepath.Join(repoRoot, "docker-compose.yml"))
	require.NoError(t, err, "docker-compose.yml is a valid Compose file")
	return p
}

func loadComposeFile(t *testing.T, path string) (*composetypes.Project, error) {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	opts, err := composecli.NewProjectOptions([]string{path},
		composecli.WithWorkingDirectory(root), composecli.WithEnv(nil), composecli.WithConsistency(true))
	require.NoError(t, err)
	return opts.LoadProject(t.Context())
}

// TestComposeLoaderRefusesMistakes shows the loader is no formality.
func TestComposeLoaderRefusesMistakes(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	require.NoError(t, err)
	for name, edit := range map[string][3]string{
		"misspelled key":     {"    restart: \"no\"\n    healthcheck: {disable: true}\n    depends_on:\n      postgres:", "    restart: \"no\"\n    healthcheck: {disable: true}\n    dependz_on:\n      postgres:", "dependz_on"},
		"unknown dependency": {"      migrate: {condition: service_completed_successfully}", "      migrat: {condition: service_completed_successfully}", `undefined service "migrat"`},
		"wrong type":         {"      retries: 30\n\n  nats:", "      retries: thirty\n\n  nats:", "thirty"},
	} {
		edited := strings.Replace(string(raw), edit[0], edit[1], 1)
		require.NotEqual(t, string(raw), edited, name)
		path := filepath.Join(t.TempDir(), "docker-compose.yml")
		require.NoError(t, os.WriteFile(path, []byte(edited), 0o600))
		_, err := loadComposeFile(t, path)
		require.ErrorContains(t, err, edit[2], name)
	}
}

// TestComposeRunsEveryTargetFromOneImage loads docker-compose.yml: one
// service per target, all on the one image built from the Dockerfile,
// after the one-shot migration, and only configuration names the binary
// reads.
func TestComposeRunsEveryTargetFromOneImage(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	image := p.Services["gateway"].Image
	require.NotEmpty(t, image)
	for _, target := range servedTargets(t) {
		svc, ok := p.Services[target]
		require.True(t, ok, "a service for target %s", target)
		require.Equal(t, composetypes.ShellCommand{"-target=" + target}, svc.Command, target)
		require.Equal(t, image, svc.Image, "%s runs the one image", target)
		require.NotNil(t, svc.Build, "%s builds from the Dockerfile", target)
		require.Contains(t, svc.DependsOn, "setup", "%s starts after the migration and the tenant", target)
		require.NotEmpty(t, svc.Environment["MNEMOS_NATS_URL"], "%s needs NATS", target)
		require.NotEmpty(t, svc.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"], "%s sends traces to the viewer", target)
		require.NotNil(t, svc.HealthCheck, "%s has a health check", target)
	}
	require.Equal(t, composetypes.ShellCommand{"migrate"}, p.Services["migrate"].Command)
	require.Equal(t, image, p.Services["migrate"].Image)
	require.Contains(t, p.Services["migrate"].DependsOn, "postgres")
	require.Equal(t, composetypes.ShellCommand{"tenant", "create", "-name", "development", "-key", "mnemos-dev-key", "dev"}, p.Services["setup"].Command)
	require.Contains(t, p.Services["setup"].DependsOn, "migrate")
	for _, infra := range []string{"postgres", "nats", "jaeger", "prometheus", "grafana"} {
		require.Contains(t, p.Services, infra)
	}
	for name, svc := range p.Services {
		if svc.Image != image {
			continue
		}
		var names []string
		for n := range svc.Environment {
			names = append(names, n)
		}
		requireKnownEnv(t, "docker-compose.yml service "+name, names)
	}

	// Prometheus scrapes every target's operator listener, which is on the
	// port of the services' MNEMOS_ADMIN_ADDR and on no host port.
	prom, err := os.ReadFile(filepath.Join(repoRoot, "deploy/prometheus/prometheus.yml"))
	require.NoError(t, err)
	for _, target := range servedTargets(t) {
		admin := p.Services[target].Environment["MNEMOS_ADMIN_ADDR"]
		require.NotNil(t, admin, "%s sets its operator listener", target)
		_, port, err := net.SplitHostPort(*admin)
		require.NoError(t, err)
		require.Contains(t, string(prom), `"`+target+`:`+port+`"`)
		require.NotContains(t, string(prom), `"`+target+`:8080"`, "not the API port")
		for _, published := range p.Services[target].Ports {
			require.NotEqual(t, port, strconv.FormatUint(uint64(published.Target), 10), "%s publishes no admin port", target)
		}
	}
}

// ---------------------------------------------------------------------------
// Helm

// helmBuilt builds the helm tool of tools/go.mod once per test process
// (the first build takes minutes; parallel tests must not each start one).
var helmBuilt = sync.OnceValue(func() error {
	cmd := exec.Command("go", "tool", "-modfile=tools/go.mod", "helm", "version")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go tool helm: %w: %s", err, out)
	}
	return nil
})

// helmTemplate renders the chart with `helm template` (the helm tool of
// tools/go.mod) and returns its manifests, or helm's error.
func helmTemplate(t *testing.T, args ...string) ([]map[string]any, error) {
	t.Helper()
	require.NoError(t, helmBuilt())
	cmdArgs := append([]string{"tool", "-modfile=tools/go.mod", "helm", "template", "mnemos", "deploy/helm/mnemos", "--namespace", "mnemos"}, args...)
	cmd := exec.Command("go", cmdArgs...)
	cmd.Dir = repoRoot
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, errors.New(stderr.String())
	}
	return splitManifests(t, stdout.Bytes()), nil
}

func named(docs []map[string]any, kind, name string) map[string]any {
	for _, d := range docs {
		if d["kind"] == kind && d["metadata"].(map[string]any)["name"] == name {
			return d
		}
	}
	return nil
}

// dig walks maps and lists: dig(doc, "spec", "template", 0) …
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// TestChartRendersValidManifests renders the chart with its defaults and
// with production-like values and validates every manifest against the
// Kubernetes schemas (and the ServiceMonitor and ScaledObject CRDs), then
// checks what the chart promises: a Deployment per target on the one image
// with both probes, the migration as a hook, the extractor's autoscaler on
// its consumer, and only configuration names the binary reads.
func TestChartRendersValidManifests(t *testing.T) {
	t.Parallel()
	v := newKubeValidator(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"defaults", nil},
		{"production", []string{"-f", "deploy/helm/mnemos/ci/production-values.yaml"}},
		{"existing secrets, no autoscaling", []string{"--set", "secret.existingSecret=mnemos-credentials", "--set", "migration.existingSecret=mnemos-owner",
			"--set", "targets.extractor.autoscaling.enabled=false", "--set", "migration.enabled=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := helmTemplate(t, tc.args...)
			require.NoError(t, err)
			require.NotEmpty(t, docs)
			for _, d := range docs {
				require.NoError(t, v.validate(d))
			}

			var env []string
			for _, target := range servedTargets(t) {
				dep := named(docs, "Deployment", "mnemos-"+target)
				require.NotNil(t, dep, "a Deployment for %s", target)
				c := dig(dep, "spec", "template", "spec", "containers", 0)
				require.Equal(t, []any{"-target=" + target}, dig(c, "args"))
				require.Equal(t, dig(named(docs, "Deployment", "mnemos-gateway"), "spec", "template", "spec", "containers", 0, "image"), dig(c, "image"), "one image")
				require.Equal(t, "/healthz", dig(c, "livenessProbe", "httpGet", "path"))
				require.Equal(t, "/readyz", dig(c, "readinessProbe", "httpGet", "path"))
				require.NotNil(t, named(docs, "Service", "mnemos-"+target))
				requireAdminListener(t, docs, target)
				for _, e := range dig(c, "env").([]any) {
					env = append(env, e.(map[string]any)["name"].(string))
				}
			}
			cm := named(docs, "ConfigMap", "mnemos")
			for k := range cm["data"].(map[string]any) {
				env = append(env, k)
			}
			if s := named(docs, "Secret", "mnemos"); s != nil {
				for k := range s["stringData"].(map[string]any) {
					env = append(env, k)
				}
			}
			requireKnownEnv(t, "the chart", env)

			job := named(docs, "Job", "mnemos-migrate")
			require.NotNil(t, job)
			require.Equal(t, "pre-install,pre-upgrade", dig(job, "metadata", "annotations", "helm.sh/hook"))
			require.Equal(t, []any{"migrate"}, dig(job, "spec", "template", "spec", "containers", 0, "args"))

			// The Job gets both roles' URLs; the owner's reaches nothing else.
			jobEnv := map[string]string{}
			for _, e := range dig(job, "spec", "template", "spec", "containers", 0, "env").([]any) {
				if ref := dig(e, "valueFrom", "secretKeyRef", "name"); ref != nil {
					jobEnv[e.(map[string]any)["name"].(string)] = ref.(string)
				}
			}
			require.Contains(t, jobEnv, "MNEMOS_MIGRATE_DATABASE_URL")
			require.Contains(t, jobEnv, "MNEMOS_DATABASE_URL")
			require.Equal(t, jobEnv["MNEMOS_MIGRATE_DATABASE_URL"], jobEnv["MNEMOS_DATABASE_URL"], "one Secret holds both")
			require.NotContains(t, env, "MNEMOS_MIGRATE_DATABASE_URL", "the targets connect as the services' role only")
			for _, d := range docs {
				if d["kind"] == "Secret" && d["metadata"].(map[string]any)["name"] != jobEnv["MNEMOS_DATABASE_URL"] {
					require.Nil(t, dig(d, "stringData", "MNEMOS_MIGRATE_DATABASE_URL"), "the owner's URL only in the migration's Secret")
				}
			}
		})
	}

	// Production: R3 streams, the extractor scaled by KEDA on its consumer
	// of the namespaced EVENTS stream, and no HPA competing with it.
	docs, err := helmTemplate(t, "-f", "deploy/helm/mnemos/ci/production-values.yaml")
	require.NoError(t, err)
	require.Equal(t, "3", dig(named(docs, "ConfigMap", "mnemos"), "data", "MNEMOS_STREAM_REPLICAS"))
	so := named(docs, "ScaledObject", "mnemos-extractor")
	require.NotNil(t, so)
	trigger := dig(so, "spec", "triggers", 0, "metadata")
	require.Equal(t, "PROD_"+bus.StreamEvents, dig(trigger, "stream"), "the stream as the bus names it in namespace prod")
	require.Equal(t, "extractor", dig(trigger, "consumer"))
	require.Nil(t, named(docs, "HorizontalPodAutoscaler", "mnemos-extractor"))
	require.Nil(t, dig(named(docs, "Deployment", "mnemos-extractor"), "spec", "replicas"), "KEDA owns the replicas")
	sm := named(docs, "ServiceMonitor", "mnemos")
	require.NotNil(t, sm)
	require.Equal(t, "admin", dig(sm, "spec", "endpoints", 0, "port"), "Prometheus scrapes the operator listener")
	require.Equal(t, "/metrics", dig(sm, "spec", "endpoints", 0, "path"))
	require.Equal(t, "admin", dig(sm, "spec", "selector", "matchLabels", "mnemos/listener"), "only the admin Services")
	require.NotNil(t, named(docs, "Ingress", "mnemos"))
	owner := named(docs, "Secret", "mnemos-migrate")
	require.Equal(t, "postgres://mnemos_owner:0wner-s3cret@pg-primary.databases.svc:5432/mnemos?sslmode=verify-full", dig(owner, "stringData", "MNEMOS_MIGRATE_DATABASE_URL"))
	require.Equal(t, dig(named(docs, "Secret", "mnemos"), "stringData", "MNEMOS_DATABASE_URL"), dig(owner, "stringData", "MNEMOS_DATABASE_URL"))

	// Defaults: the extractor's HPA.
	docs, err = helmTemplate(t)
	require.NoError(t, err)
	hpa := named(docs, "HorizontalPodAutoscaler", "mnemos-extractor")
	require.NotNil(t, hpa)
	require.Equal(t, "mnemos-extractor", dig(hpa, "spec", "scaleTargetRef", "name"))
	require.Equal(t, bus.StreamEvents, "EVENTS")
}

// requireAdminListener checks a target's operator listener in the chart:
// MNEMOS_ADMIN_ADDR's port is the container's admin port, the pods' scrape
// annotations name it, a ClusterIP Service of its own exposes it, and the
// target's other Service (the gateway's is the API) does not.
func requireAdminListener(t *testing.T, docs []map[string]any, target string) {
	t.Helper()
	_, port, err := net.SplitHostPort(dig(named(docs, "ConfigMap", "mnemos"), "data", "MNEMOS_ADMIN_ADDR").(string))
	require.NoError(t, err)
	dep := named(docs, "Deployment", "mnemos-"+target)
	ports := map[string]string{}
	for _, p := range dig(dep, "spec", "template", "spec", "containers", 0, "ports").([]any) {
		ports[dig(p, "name").(string)] = fmt.Sprint(dig(p, "containerPort"))
	}
	require.Equal(t, port, ports["admin"], "%s: the container's admin port is MNEMOS_ADMIN_ADDR's", target)
	require.Equal(t, port, dig(dep, "spec", "template", "metadata", "annotations", "prometheus.io/port"), target)

	admin := named(docs, "Service", "mnemos-"+target+"-admin")
	require.NotNil(t, admin, "%s has an admin Service", target)
	require.Equal(t, "ClusterIP", dig(admin, "spec", "type"))
	require.Equal(t, "admin", dig(admin, "spec", "ports", 0, "targetPort"))
	require.Len(t, dig(admin, "spec", "ports"), 1)
	for _, p := range dig(named(docs, "Service", "mnemos-"+target), "spec", "ports").([]any) {
		require.NotEqual(t, "admin", dig(p, "targetPort"), "%s: the API Service does not expose the admin port", target)
	}
}

// TestSchemaValidationCatchesMistakes shows the validation is not a
// formality: a misspelled field, a wrong type or an unknown kind fails it,
// in core kinds and in CRDs alike, and so does a typo in values that
// reaches a rendered manifest.
func TestSchemaValidationCatchesMistakes(t *testing.T) {
	t.Parallel()
	v := newKubeValidator(t)
	docs, err := helmTemplate(t, "-f", "deploy/helm/mnemos/ci/production-values.yaml")
	require.NoError(t, err)
	fresh := func(kind, name string) map[string]any {
		d := named(docs, kind, name)
		require.NotNil(t, d)
		var c map[string]any
		raw, err := yaml.Marshal(d)
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(raw, &c))
		require.NoError(t, v.validate(c), "unchanged, it is valid")
		return c
	}

	d := fresh("Deployment", "mnemos-gateway")
	dig(d, "spec", "template", "spec", "containers", 0).(map[string]any)["imagePullPolicyy"] = "Always"
	require.ErrorContains(t, v.validate(d), "imagePullPolicyy", "a misspelled field")

	d = fresh("Deployment", "mnemos-gateway")
	d["spec"].(map[string]any)["replicas"] = "three"
	require.Error(t, v.validate(d), "a string where an integer belongs")

	d = fresh("Deployment", "mnemos-gateway")
	delete(dig(d, "spec", "template", "spec", "containers", 0).(map[string]any), "name")
	require.Error(t, v.validate(d), "a required field missing")

	d = fresh("Service", "mnemos-gateway")
	dig(d, "spec", "ports", 0).(map[string]any)["targetPort"] = 8080 // int-or-string: both are fine
	require.NoError(t, v.validate(d))
	dig(d, "spec", "ports", 0).(map[string]any)["targetPort"] = []any{8080}
	require.Error(t, v.validate(d))

	d = fresh("ScaledObject", "mnemos-extractor")
	dig(d, "spec", "triggers", 0).(map[string]any)["metdata"] = map[string]any{}
	require.ErrorContains(t, v.validate(d), "metdata", "a misspelled field of a CRD")

	d = fresh("ScaledObject", "mnemos-extractor")
	d["spec"].(map[string]any)["maxReplicaCount"] = "thirty"
	require.Error(t, v.validate(d), "a wrong type in a CRD")

	d = fresh("ServiceMonitor", "mnemos")
	dig(d, "spec", "endpoints", 0).(map[string]any)["intervall"] = "30s"
	require.ErrorContains(t, v.validate(d), "intervall")

	d = fresh("Deployment", "mnemos-gateway")
	d["kind"] = "Deploymnet"
	require.ErrorContains(t, v.validate(d), "no schema")

	// A typo in values lands in a manifest, and the manifest fails.
	bad, err := helmTemplate(t, "--set-json", `probes.liveness={"httpGet":{"path":"/healthz","port":"http"},"periodSecond":10}`)
	require.NoError(t, err, "helm renders it")
	var errs []error
	for _, d := range bad {
		if err := v.validate(d); err != nil {
			errs = append(errs, err)
		}
	}
	require.NotEmpty(t, errs)
	require.ErrorContains(t, errs[0], "periodSecond")
}
