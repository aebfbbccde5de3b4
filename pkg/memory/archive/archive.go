// Package archive reads and writes a memory scope in Claude Code's own
// layout: a gzipped tar of a directory memory/ holding MEMORY.md (the
// scope's index) and one <name>.md per memory, each the memory's markdown
// with its frontmatter. The same files, extracted into
// ~/.claude/projects/<project>/memory/, are what Claude Code reads.
//
// Read is written for archives from anyone: it bounds the files, their
// sizes and the total it decompresses, and refuses every entry that is not
// a regular file directly in memory/ (or at the top, the same layout
// without the prefix). Each refusal is a *memory.Error naming the file.
package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// Dir is the directory an archive holds its files in.
const Dir = "memory"

// IndexFile is the index's file name.
const IndexFile = "MEMORY.md"

// ContentType is an archive's media type.
const ContentType = "application/gzip"

// Refusal reasons of an archive's entries (memory.Reason, so that they are
// the API's codes and the refusal metric's labels).
const (
	// ReasonBadArchive: not a gzipped tar, or a corrupt one.
	ReasonBadArchive memory.Reason = "bad_archive"
	// ReasonBadEntry: a symlink, a directory other than memory/, a device…
	ReasonBadEntry memory.Reason = "bad_entry"
	// ReasonBadPath: an absolute path, "..", a file in a subdirectory, a
	// file that is not <name>.md or MEMORY.md, or a file given twice.
	ReasonBadPath memory.Reason = "bad_path"
	// ReasonTooManyFiles: more files than Limits.MaxFiles.
	ReasonTooManyFiles memory.Reason = "too_many_files"
)

// Limits bound what Read accepts.
type Limits struct {
	// MaxFiles bounds the files (memories and the index).
	MaxFiles int
	// MaxFileBytes bounds one memory file, MaxIndexBytes the index.
	MaxFileBytes  int64
	MaxIndexBytes int64
	// MaxTotalBytes bounds what is decompressed in all (tar headers
	// included), so a small gzip of zeros cannot make the reader work on
	// gigabytes.
	MaxTotalBytes int64
}

// DefaultLimits fit a scope within the memory defaults: 16 KiB per memory,
// an index of 1 MiB at most (what an index edit may send), 2,000 files and
// 64 MiB decompressed.
func DefaultLimits() Limits {
	return Limits{MaxFiles: 2_000, MaxFileBytes: 16 << 10, MaxIndexBytes: 1 << 20, MaxTotalBytes: 64 << 20}
}

// LimitsFor are DefaultLimits with a memory file bounded by the tenant's
// memory limits (max_bytes) instead.
func LimitsFor(l memory.Limits) Limits {
	out := DefaultLimits()
	out.MaxFileBytes = int64(l.MaxBytes)
	return out
}

// File is one memory of an archive.
type File struct {
	// Path is the entry's name in the archive, as errors name it.
	Path     string
	Document memory.Document
}

// Scope is what an archive holds.
type Scope struct {
	// Index is MEMORY.md as it was in the archive; HasIndex is false when
	// there was none.
	Index    string
	HasIndex bool
	// Files are the memories, in the order of their names.
	Files []File
}

// Write writes index and docs as a gzipped tar of memory/MEMORY.md and
// memory/<name>.md, in the order of the names; every entry carries modTime.
func Write(w io.Writer, index string, docs []memory.Document, modTime time.Time) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	put := func(name, body string, mode int64) error {
		h := &tar.Header{Name: name, Mode: mode, ModTime: modTime, Format: tar.FormatPAX}
		if strings.HasSuffix(name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := io.WriteString(tw, body)
		return err
	}
	sorted := append([]memory.Document(nil), docs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	if err := put(Dir+"/", "", 0o755); err != nil {
		return fmt.Errorf("archive.Write: %w", err)
	}
	if err := put(Dir+"/"+IndexFile, index, 0o644); err != nil {
		return fmt.Errorf("archive.Write: %w", err)
	}
	for _, d := range sorted {
		if err := put(Dir+"/"+d.Name.File(), d.Markdown(), 0o644); err != nil {
			return fmt.Errorf("archive.Write %s: %w", d.Name.File(), err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive.Write: %w", err)
	}
	return gz.Close()
}

// Read reads a gzipped tar in the layout Write writes, or the same files
// without the memory/ prefix. Every file is checked (see the reasons) and
// every memory parsed with memory.ParseDocument; its frontmatter name must
// be its file name. The first problem is returned, naming its file.
func Read(r io.Reader, l Limits) (Scope, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return Scope{}, memory.Refuse(ReasonBadArchive, "not a gzipped tar: %v", err)
	}
	defer func() { _ = gz.Close() }() // a reader's Close only releases it
	counted := &countingReader{r: gz, left: l.MaxTotalBytes, bound: l.MaxTotalBytes}
	tr := tar.NewReader(counted)
	var out Scope
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Scope{}, counted.refusal(err, "")
		}
		base, err := entryName(h)
		if err != nil || base == "" {
			if err != nil {
				return Scope{}, err
			}
			continue // the memory/ directory itself
		}
		if seen[base] {
			return Scope{}, memory.Refuse(ReasonBadPath, "%s: the archive holds %s twice", clip(h.Name), base)
		}
		seen[base] = true
		if len(seen) > l.MaxFiles {
			return Scope{}, memory.Refuse(ReasonTooManyFiles, "%s: the archive holds more than %d files", clip(h.Name), l.MaxFiles)
		}
		most := l.MaxFileBytes
		if base == IndexFile {
			most = l.MaxIndexBytes
		}
		if h.Size > most {
			return Scope{}, memory.Refuse(memory.ReasonTooLarge, "%s: %d bytes, more than %d", clip(h.Name), h.Size, most)
		}
		raw, err := io.ReadAll(io.LimitReader(tr, most+1))
		if err != nil {
			return Scope{}, counted.refusal(err, h.Name)
		}
		if int64(len(raw)) > most {
			return Scope{}, memory.Refuse(memory.ReasonTooLarge, "%s: more than %d bytes", clip(h.Name), most)
		}
		if base == IndexFile {
			out.Index, out.HasIndex = string(raw), true
			continue
		}
		f, err := readFile(h.Name, base, raw)
		if err != nil {
			return Scope{}, err
		}
		out.Files = append(out.Files, f)
	}
	// The tar's end may leave padding the reader never asked for.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return Scope{}, counted.refusal(err, "")
	}
	sort.Slice(out.Files, func(i, j int) bool { return out.Files[i].Document.Name < out.Files[j].Document.Name })
	return out, nil
}

// entryName returns the file name of a regular file directly in memory/
// (or at the top), "" for the memory/ directory, or a refusal.
func entryName(h *tar.Header) (string, error) {
	name := h.Name
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) || strings.Contains(name, "\x00") {
		return "", memory.Refuse(ReasonBadPath, "%q: an absolute or malformed path; an archive holds memory/MEMORY.md and memory/<name>.md", clip(name))
	}
	for _, seg := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		if seg == ".." {
			return "", memory.Refuse(ReasonBadPath, "%q reaches outside the archive's directory", clip(name))
		}
	}
	clean := strings.TrimPrefix(path.Clean(name), "./")
	if h.Typeflag == tar.TypeDir {
		if clean == Dir || clean == "." {
			return "", nil
		}
		return "", memory.Refuse(ReasonBadEntry, "%q: a directory; an archive holds only memory/ and its files", clip(name))
	}
	if h.Typeflag != tar.TypeReg { // the reader reports the old TypeRegA as TypeReg
		return "", memory.Refuse(ReasonBadEntry, "%q: not a regular file (tar type %q); symlinks, links and devices are refused", clip(name), h.Typeflag)
	}
	base := strings.TrimPrefix(clean, Dir+"/")
	if strings.Contains(base, "/") {
		return "", memory.Refuse(ReasonBadPath, "%q: a file in a subdirectory; an archive holds memory/MEMORY.md and memory/<name>.md", clip(name))
	}
	if base == IndexFile {
		return base, nil
	}
	if !strings.HasSuffix(base, memory.FileExt) {
		return "", memory.Refuse(ReasonBadPath, "%q: not a .md file; an archive holds MEMORY.md and <name>.md", clip(name))
	}
	return base, nil
}

// readFile parses one memory file.
func readFile(entry, base string, raw []byte) (File, error) {
	name, err := memory.ParseRef(base)
	if err != nil {
		return File{}, inFile(entry, err)
	}
	doc, err := memory.ParseDocument(string(raw))
	if err != nil {
		return File{}, inFile(entry, err)
	}
	if doc.Name != name {
		return File{}, memory.Refuse(memory.ReasonNameMismatch, "%s: the file is named %s and its frontmatter names %s; a memory's file is its name plus .md", clip(entry), base, doc.Name)
	}
	return File{Path: entry, Document: doc.Canonical()}, nil
}

// inFile puts the file's name in front of a refusal.
func inFile(entry string, err error) error {
	if e, ok := memory.AsError(err); ok {
		return memory.Refuse(e.Reason, "%s: %s", clip(entry), e.Detail)
	}
	return fmt.Errorf("%s: %w", entry, err)
}

func clip(s string) string {
	const most = 120
	if len(s) > most {
		return s[:most] + "…"
	}
	return s
}

// errTotal is what countingReader returns past its bound.
var errTotal = errors.New("total bound reached")

// countingReader stops after left bytes (of bound).
type countingReader struct {
	r     io.Reader
	left  int64
	bound int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errTotal
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// refusal turns a read error into a refusal: too_large past the total
// bound, bad_archive otherwise.
func (c *countingReader) refusal(err error, entry string) error {
	where := ""
	if entry != "" {
		where = clip(entry) + ": "
	}
	if errors.Is(err, errTotal) {
		return memory.Refuse(memory.ReasonTooLarge, "%sthe archive decompresses to more than %d bytes", where, c.bound)
	}
	return memory.Refuse(ReasonBadArchive, "%sa corrupt gzipped tar: %v", where, err)
}

// Bytes writes an archive into memory (see Write).
func Bytes(index string, docs []memory.Document, modTime time.Time) ([]byte, error) {
	var b bytes.Buffer
	err := Write(&b, index, docs, modTime)
	return b.Bytes(), err
}
