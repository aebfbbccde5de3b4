package memlimit_test

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/memlimit"
)

// root makes a file system root holding the given cgroup files.
func root(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	}
	return dir
}

func TestRead(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		files map[string]string
		want  memlimit.Limit
	}{
		"v2 limit":     {map[string]string{memlimit.CgroupV2File: "1073741824\n"}, memlimit.Limit{Bytes: 1 << 30, File: memlimit.CgroupV2File}},
		"v2 max":       {map[string]string{memlimit.CgroupV2File: "max\n"}, memlimit.Limit{File: memlimit.CgroupV2File}},
		"v1 limit":     {map[string]string{memlimit.CgroupV1File: "536870912\n"}, memlimit.Limit{Bytes: 512 << 20, File: memlimit.CgroupV1File}},
		"v1 unlimited": {map[string]string{memlimit.CgroupV1File: "9223372036854771712\n"}, memlimit.Limit{File: memlimit.CgroupV1File}},
		"v2 before v1": {map[string]string{memlimit.CgroupV2File: "2147483648", memlimit.CgroupV1File: "536870912"}, memlimit.Limit{Bytes: 2 << 30, File: memlimit.CgroupV2File}},
		"no cgroup":    {nil, memlimit.Limit{}},
		"v2 max wins":  {map[string]string{memlimit.CgroupV2File: "max", memlimit.CgroupV1File: "536870912"}, memlimit.Limit{File: memlimit.CgroupV2File}},
	} {
		got, err := memlimit.Read(root(t, tc.files))
		require.NoError(t, err, name)
		require.Equal(t, tc.want, got, name)
	}
	for _, bad := range []string{"lots", "-1", "0", ""} {
		_, err := memlimit.Read(root(t, map[string]string{memlimit.CgroupV2File: bad}))
		require.ErrorContains(t, err, "memory.max", "%q", bad)
	}
}

// TestApply changes the runtime's limit of the whole test binary: not parallel.
func TestApply(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	noEnv := func(string) string { return "" }

	res, err := memlimit.Apply(root(t, map[string]string{memlimit.CgroupV2File: "1000000000"}), noEnv)
	require.NoError(t, err)
	require.EqualValues(t, 900_000_000, res.Set)
	require.EqualValues(t, 900_000_000, debug.SetMemoryLimit(-1), "the runtime has the limit")

	debug.SetMemoryLimit(before)
	res, err = memlimit.Apply(root(t, map[string]string{memlimit.CgroupV2File: "1000000000"}), func(k string) string {
		if k == "GOMEMLIMIT" {
			return "300MiB"
		}
		return ""
	})
	require.NoError(t, err)
	require.True(t, res.FromEnv)
	require.Zero(t, res.Set)
	require.Equal(t, before, debug.SetMemoryLimit(-1), "GOMEMLIMIT wins: the runtime's limit is left alone")

	res, err = memlimit.Apply(root(t, map[string]string{memlimit.CgroupV2File: "max"}), noEnv)
	require.NoError(t, err)
	require.Zero(t, res.Set)
	require.Equal(t, before, debug.SetMemoryLimit(-1), "no container limit, no soft limit")
}
