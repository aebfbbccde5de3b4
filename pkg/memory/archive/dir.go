package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// WriteDir writes index and docs into dir as Claude Code reads a memory
// directory: dir/MEMORY.md and dir/<name>.md. dir is made when missing;
// files of other names in it are left alone.
func WriteDir(dir, index string, docs []memory.Document) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("archive.WriteDir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, IndexFile), []byte(index), 0o600); err != nil {
		return fmt.Errorf("archive.WriteDir: %w", err)
	}
	for _, d := range docs {
		if err := os.WriteFile(filepath.Join(dir, d.Name.File()), []byte(d.Markdown()), 0o600); err != nil {
			return fmt.Errorf("archive.WriteDir: %w", err)
		}
	}
	return nil
}

// ReadDir reads a memory directory as Read reads an archive of it, with
// the same checks: each entry of dir becomes an entry of a gzipped tar as
// it is (a symlink stays a symlink, a subdirectory a directory), which
// Read then reads. A regular file larger than any file Read accepts is
// refused before it is read.
func ReadDir(dir string, l Limits) (Scope, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Scope{}, fmt.Errorf("archive.ReadDir: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		if err := addEntry(tw, dir, e, l); err != nil {
			return Scope{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return Scope{}, fmt.Errorf("archive.ReadDir: %w", err)
	}
	if err := gz.Close(); err != nil {
		return Scope{}, fmt.Errorf("archive.ReadDir: %w", err)
	}
	return Read(&b, l)
}

func addEntry(tw *tar.Writer, dir string, e os.DirEntry, l Limits) error {
	fi, err := e.Info() // Lstat: a symlink is not followed
	if err != nil {
		return fmt.Errorf("archive.ReadDir: %w", err)
	}
	h, err := tar.FileInfoHeader(fi, "")
	if err != nil {
		return memory.Refuse(ReasonBadEntry, "%s: %v", e.Name(), err)
	}
	h.Name = e.Name()
	if !fi.Mode().IsRegular() {
		h.Size = 0
		return tw.WriteHeader(h)
	}
	if most := max(l.MaxFileBytes, l.MaxIndexBytes); fi.Size() > most {
		return memory.Refuse(memory.ReasonTooLarge, "%s: %d bytes, more than %d", e.Name(), fi.Size(), most)
	}
	raw, err := readIn(dir, e.Name(), h.Size)
	if err != nil {
		return fmt.Errorf("archive.ReadDir: %w", err)
	}
	h.Size = int64(len(raw))
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("archive.ReadDir: %w", err)
	}
	_, err = tw.Write(raw)
	return err
}

// readIn reads at most n bytes of the file name of dir, through an
// os.Root, so that nothing outside dir is read.
func readIn(dir, name string, n int64) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }() // read only
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	return io.ReadAll(io.LimitReader(f, n))
}
