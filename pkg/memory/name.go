package memory

import (
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest name, in bytes.
const MaxNameLen = 64

// FileExt is what a memory's file name adds to its name.
const FileExt = ".md"

// Name names a memory within its scope. A name is one path segment of
// lowercase ASCII letters, digits, '-' and '_', starting with a letter or a
// digit, at most MaxNameLen bytes: it can never name a directory, climb out
// of its scope or differ from another name only in case. The memory's file,
// as the index points to it, is the name plus ".md" (see File); the name is
// also the frontmatter's "name".
type Name string

// ParseName validates s as a name. A name that tries to reach outside its
// scope (a path separator, "..", a scope prefix "user:…", a leading "~") is
// refused as out_of_scope; any other invalid name as bad_name.
func ParseName(s string) (Name, error) {
	switch {
	case s == "":
		return "", Refuse(ReasonBadName, "the name is empty")
	case !utf8.ValidString(s):
		return "", Refuse(ReasonBadName, "the name is not valid UTF-8")
	case strings.ContainsRune(s, 0):
		return "", Refuse(ReasonBadName, "the name contains a NUL byte")
	case strings.ContainsAny(s, `/\:`) || strings.Contains(s, "..") || strings.HasPrefix(s, "~"):
		return "", Refuse(ReasonOutOfScope, "%q reaches outside its scope: a name is one file name of this scope, without directories or another scope", clip(s))
	case len(s) > MaxNameLen:
		return "", Refuse(ReasonBadName, "the name is %d bytes long, longer than %d", len(s), MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		lower, digit := c >= 'a' && c <= 'z', c >= '0' && c <= '9'
		if i == 0 && !lower && !digit {
			return "", Refuse(ReasonBadName, "%q must start with a lowercase letter or a digit", clip(s))
		}
		if !lower && !digit && c != '-' && c != '_' {
			return "", Refuse(ReasonBadName, "%q: names are lowercase letters, digits, '-' and '_' (for example feedback-testing)", clip(s))
		}
	}
	return Name(s), nil
}

// ParseRef accepts a name or its file name ("testing" or "testing.md").
func ParseRef(s string) (Name, error) {
	return ParseName(strings.TrimSuffix(s, FileExt))
}

// File is the memory's file name: the name plus ".md".
func (n Name) File() string { return string(n) + FileExt }

func (n Name) String() string { return string(n) }

// clip shortens s for an error message.
func clip(s string) string {
	const most = 80
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
