// Package archivetest writes gzipped tars entry by entry, as a test wants
// them, good or hostile, for the readers of pkg/memory/archive.
package archivetest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"testing"
)

// Entry is one tar entry: a regular file with Body unless Typeflag says
// otherwise (Link for a symlink or a hard link).
type Entry struct {
	Name, Body, Link string
	Typeflag         byte
}

// Tgz writes entries as a gzipped tar.
func Tgz(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	if _, err := gz.Write(Tar(t, entries...)); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Tar writes entries as a bare tar.
func Tar(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Typeflag: e.Typeflag, Mode: 0o644, Linkname: e.Link}
		if h.Typeflag == 0 {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.Body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Bomb is the tar of entries followed, in the same gzip stream, by mib
// MiB of zeros: about a thousandth of that compressed.
func Bomb(t testing.TB, mib int, entries ...Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	gz, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gz.Write(Tar(t, entries...)); err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for range mib {
		if _, err := gz.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Files reads a gzipped tar: its entries' names in order and their contents.
func Files(t testing.TB, tgz []byte) (names []string, content map[string]string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	content = map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF { //nolint:errorlint // tar.Reader returns io.EOF itself
			return names, content
		}
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		content[h.Name] = string(raw)
	}
}
