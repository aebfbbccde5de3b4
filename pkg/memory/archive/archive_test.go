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

	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/archive"
)

func doc(name, desc, body string) memory.Document {
	return memory.Document{Name: memory.Name(name), Description: desc, Type: memory.TypeProject, Body: body}
}

// entry is one tar entry a test writes as it likes.
type entry struct {
	name     string
	typeflag byte
	body     string
	link     string
}

func tgz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		tf := e.typeflag
		if tf == 0 {
			tf = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: tf, Mode: 0o644, Linkname: e.link}
		if tf == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		require.NoError(t, tw.WriteHeader(h))
		_, err := tw.Write([]byte(e.body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return b.Bytes()
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
	got, err := archive.Read(bytes.NewReader(tgz(t,
		entry{name: "MEMORY.md", body: "- [a](a.md) — x\n"},
		entry{name: "./a.md", body: doc("a", "A", "body").Markdown()},
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
	zeros := strings.Repeat("\x00", 10<<20)
	cases := []struct {
		name    string
		raw     []byte
		limits  archive.Limits
		reason  memory.Reason
		mention string
	}{
		{"not gzip", []byte("PK\x03\x04 a zip"), archive.DefaultLimits(), archive.ReasonBadArchive, "gzip"},
		{"gzip but not tar", gzipOf(t, "just text, no tar header here"+strings.Repeat(" ", 600)), archive.DefaultLimits(), archive.ReasonBadArchive, "corrupt"},
		{"bad frontmatter", tgz(t, entry{name: "memory/a.md", body: "no frontmatter"}), archive.DefaultLimits(), memory.ReasonBadFrontmatter, "memory/a.md"},
		{"bad type", tgz(t, entry{name: "memory/a.md", body: strings.Replace(good, "type: project", "type: gossip", 1)}), archive.DefaultLimits(), memory.ReasonBadType, "memory/a.md"},
		{"bad name", tgz(t, entry{name: "memory/Bad Name.md", body: good}), archive.DefaultLimits(), memory.ReasonBadName, "Bad Name.md"},
		{"name is not the file", tgz(t, entry{name: "memory/b.md", body: good}), archive.DefaultLimits(), memory.ReasonNameMismatch, "memory/b.md"},
		{"too large", tgz(t, entry{name: "memory/a.md", body: good + strings.Repeat("x", 20<<10)}), archive.DefaultLimits(), memory.ReasonTooLarge, "memory/a.md"},
		{"too many files", tgz(t, entry{name: "a.md", body: good}, entry{name: "b.md", body: strings.Replace(good, "name: a", "name: b", 1)},
			entry{name: "c.md", body: strings.Replace(good, "name: a", "name: c", 1)}, entry{name: "d.md", body: strings.Replace(good, "name: a", "name: d", 1)}),
			small, archive.ReasonTooManyFiles, "d.md"},
		{"parent path", tgz(t, entry{name: "../x.md", body: good}), archive.DefaultLimits(), archive.ReasonBadPath, "../x.md"},
		{"parent inside", tgz(t, entry{name: "memory/../../x.md", body: good}), archive.DefaultLimits(), archive.ReasonBadPath, "memory/../../x.md"},
		{"absolute path", tgz(t, entry{name: "/etc/x.md", body: good}), archive.DefaultLimits(), archive.ReasonBadPath, "/etc/x.md"},
		{"subdirectory file", tgz(t, entry{name: "memory/sub/a.md", body: good}), archive.DefaultLimits(), archive.ReasonBadPath, "memory/sub/a.md"},
		{"other directory", tgz(t, entry{name: "memory/sub/", typeflag: tar.TypeDir}), archive.DefaultLimits(), archive.ReasonBadEntry, "memory/sub/"},
		{"not markdown", tgz(t, entry{name: "memory/notes.txt", body: "x"}), archive.DefaultLimits(), archive.ReasonBadPath, "notes.txt"},
		{"symlink", tgz(t, entry{name: "memory/a.md", typeflag: tar.TypeSymlink, link: "/etc/passwd"}), archive.DefaultLimits(), archive.ReasonBadEntry, "memory/a.md"},
		{"hard link", tgz(t, entry{name: "memory/a.md", typeflag: tar.TypeLink, link: "memory/b.md"}), archive.DefaultLimits(), archive.ReasonBadEntry, "memory/a.md"},
		{"fifo", tgz(t, entry{name: "memory/a.md", typeflag: tar.TypeFifo}), archive.DefaultLimits(), archive.ReasonBadEntry, "memory/a.md"},
		{"twice", tgz(t, entry{name: "memory/a.md", body: good}, entry{name: "a.md", body: good}), archive.DefaultLimits(), archive.ReasonBadPath, "twice"},
		// 10 MiB of zeros in a file the header says is small: the bomb
		// is the gzip stream, bounded by MaxTotalBytes.
		{"gzip bomb", gzipOf(t, string(tgz0(t, entry{name: "memory/a.md", body: good}))+zeros), small, memory.ReasonTooLarge, "decompresses"},
		{"big index", tgz(t, entry{name: "memory/MEMORY.md", body: strings.Repeat("x", 2<<20)}), archive.DefaultLimits(), memory.ReasonTooLarge, "MEMORY.md"},
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

// tgz0 is tgz without the gzip: the bare tar.
func tgz0(t *testing.T, entries ...entry) []byte {
	zr := must(gzip.NewReader(bytes.NewReader(tgz(t, entries...))))
	var b bytes.Buffer
	_, err := b.ReadFrom(zr)
	require.NoError(t, err)
	return b.Bytes()
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
