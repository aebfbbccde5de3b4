package archive_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/archivetest"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/archive"
)

func doc(name, desc, body string) memory.Document {
	return memory.Document{Name: memory.Name(name), Description: desc, Type: memory.TypeProject, Body: body}
}

func TestWriteThenRead(t *testing.T) {
	t.Parallel()
	docs := []memory.Document{doc("zeta", "Last one", "Z."), doc("alpha", `"Quoted" description`, "Line 1\nLine 2")}
	index := "- [alpha](alpha.md) — first\n- [zeta](zeta.md) — last\n"
	raw, err := archive.Bytes(index, docs, time.Unix(1_700_000_000, 0))
	require.NoError(t, err)

	// The layout: memory/, memory/MEMORY.md, then the memories by name.
	tr := tar.NewReader(must(gzip.NewReader(bytes.NewReader(raw))))
	var names []string
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		names = append(names, h.Name)
	}
	require.Equal(t, []string{"memory/", "memory/MEMORY.md", "memory/alpha.md", "memory/zeta.md"}, names)

	got, err := archive.Read(bytes.NewReader(raw), archive.DefaultLimits())
	require.NoError(t, err)
	require.True(t, got.HasIndex)
	require.Equal(t, index, got.Index)
	require.Len(t, got.Files, 2)
	require.Equal(t, docs[1], got.Files[0].Document)
	require.Equal(t, docs[0], got.Files[1].Document)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestReadWithoutThePrefix(t *testing.T) {
	t.Parallel()
	got, err := archive.Read(bytes.NewReader(archivetest.Tgz(t,
		archivetest.Entry{Name: "MEMORY.md", Body: "- [a](a.md) — x\n"},
		archivetest.Entry{Name: "./a.md", Body: doc("a", "A", "body").Markdown()},
	)), archive.DefaultLimits())
	require.NoError(t, err)
	require.Equal(t, "- [a](a.md) — x\n", got.Index)
	require.Equal(t, memory.Name("a"), got.Files[0].Document.Name)
}

func TestReadRefusesBadInput(t *testing.T) {
	t.Parallel()
	good := doc("a", "A", "body").Markdown()
	small := archive.DefaultLimits()
	small.MaxFiles, small.MaxTotalBytes = 3, 200_000
	cases := []struct {
		name    string
		raw     []byte
		limits  archive.Limits
		reason  memory.Reason
		mention string
	}{
		{"not gzip", []byte("PK\x03\x04 a zip"), archive.DefaultLimits(), archive.ReasonBadArchive, "gzip"},
		{"gzip but not tar", gzipOf(t, "just text, no tar header here"+strings.Repeat(" ", 600)), archive.DefaultLimits(), archive.ReasonBadArchive, "corrupt"},
		{"bad frontmatter", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Body: "no frontmatter"}), archive.DefaultLimits(), memory.ReasonBadFrontmatter, "memory/a.md"},
		{"bad type", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Body: strings.Replace(good, "type: project", "type: gossip", 1)}), archive.DefaultLimits(), memory.ReasonBadType, "memory/a.md"},
		{"bad name", archivetest.Tgz(t, archivetest.Entry{Name: "memory/Bad Name.md", Body: good}), archive.DefaultLimits(), memory.ReasonBadName, "Bad Name.md"},
		{"name is not the file", archivetest.Tgz(t, archivetest.Entry{Name: "memory/b.md", Body: good}), archive.DefaultLimits(), memory.ReasonNameMismatch, "memory/b.md"},
		{"too large", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Body: good + strings.Repeat("x", 20<<10)}), archive.DefaultLimits(), memory.ReasonTooLarge, "memory/a.md"},
		{"too many files", archivetest.Tgz(t, archivetest.Entry{Name: "a.md", Body: good}, archivetest.Entry{Name: "b.md", Body: strings.Replace(good, "name: a", "name: b", 1)},
			archivetest.Entry{Name: "c.md", Body: strings.Replace(good, "name: a", "name: c", 1)}, archivetest.Entry{Name: "d.md", Body: strings.Replace(good, "name: a", "name: d", 1)}),
			small, archive.ReasonTooManyFiles, "d.md"},
		{"parent path", archivetest.Tgz(t, archivetest.Entry{Name: "../x.md", Body: good}), archive.DefaultLimits(), archive.ReasonBadPath, "../x.md"},
		{"parent inside", archivetest.Tgz(t, archivetest.Entry{Name: "memory/../../x.md", Body: good}), archive.DefaultLimits(), archive.ReasonBadPath, "memory/../../x.md"},
		{"absolute path", archivetest.Tgz(t, archivetest.Entry{Name: "/etc/x.md", Body: good}), archive.DefaultLimits(), archive.ReasonBadPath, "/etc/x.md"},
		{"subdirectory file", archivetest.Tgz(t, archivetest.Entry{Name: "memory/sub/a.md", Body: good}), archive.DefaultLimits(), archive.ReasonBadPath, "memory/sub/a.md"},
		{"other directory", archivetest.Tgz(t, archivetest.Entry{Name: "memory/sub/", Typeflag: tar.TypeDir}), archive.DefaultLimits(), archive.ReasonBadEntry, "memory/sub/"},
		{"not markdown", archivetest.Tgz(t, archivetest.Entry{Name: "memory/notes.txt", Body: "x"}), archive.DefaultLimits(), archive.ReasonBadPath, "notes.txt"},
		{"symlink", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Typeflag: tar.TypeSymlink, Link: "/etc/passwd"}), archive.DefaultLimits(), archive.ReasonBadEntry, "memory/a.md"},
		{"hard link", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Typeflag: tar.TypeLink, Link: "memory/b.md"}), archive.DefaultLimits(), archive.ReasonBadEntry, "memory/a.md"},
		{"fifo", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Typeflag: tar.TypeFifo}), archive.DefaultLimits(), archive.ReasonBadEntry, "memory/a.md"},
		{"twice", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Body: good}, archivetest.Entry{Name: "a.md", Body: good}), archive.DefaultLimits(), archive.ReasonBadPath, "twice"},
		// 10 MiB of zeros in a file the header says is small: the bomb
		// is the gzip stream, bounded by MaxTotalBytes.
		{"gzip bomb", archivetest.Bomb(t, 10, archivetest.Entry{Name: "memory/a.md", Body: good}), small, memory.ReasonTooLarge, "decompresses"},
		{"big index", archivetest.Tgz(t, archivetest.Entry{Name: "memory/MEMORY.md", Body: strings.Repeat("x", 2<<20)}), archive.DefaultLimits(), memory.ReasonTooLarge, "MEMORY.md"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := archive.Read(bytes.NewReader(c.raw), c.limits)
			e, ok := memory.AsError(err)
			require.True(t, ok, "want a refusal, got %v", err)
			require.Equal(t, c.reason, e.Reason, e.Detail)
			require.Contains(t, e.Detail, c.mention)
		})
	}
}

func gzipOf(t *testing.T, s string) []byte {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	_, err := gz.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, gz.Close())
	return b.Bytes()
}

func TestDirRoundTripAndSymlink(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "memory")
	docs := []memory.Document{doc("a", "A", "body a"), doc("b", "B", "")}
	require.NoError(t, archive.WriteDir(dir, "- [a](a.md) — A\n- [b](b.md) — B\n", docs))
	got, err := archive.ReadDir(dir, archive.DefaultLimits())
	require.NoError(t, err)
	require.Equal(t, "- [a](a.md) — A\n- [b](b.md) — B\n", got.Index)
	require.Equal(t, docs, []memory.Document{got.Files[0].Document, got.Files[1].Document})

	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "c.md")))
	_, err = archive.ReadDir(dir, archive.DefaultLimits())
	e, ok := memory.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, archive.ReasonBadEntry, e.Reason)
	require.Contains(t, e.Detail, "c.md")
}
