package turn

// MaxIDLen is the longest id or token, in bytes, as the schema allows.
const MaxIDLen = 128

// ValidToken reports whether s is a token as the schema's $defs/token
// defines it: 1 to MaxIDLen ASCII letters, digits, '_' and '-', starting
// with a letter or a digit. Session, tenant and agent ids and memory scope
// ids are tokens. A token is also a valid NATS subject token, and it holds
// nothing Postgres refuses (no NUL, no invalid UTF-8), so an id every entry
// point checks with ValidToken can always be stored, published and addressed
// by the API.
func ValidToken(s string) bool {
	return validID(s, false)
}

// ValidID reports whether s is an id as the schema's $defs/id defines it:
// a token that may also hold '.' and ':' after its first character. Event
// ids and message uuids are ids.
func ValidID(s string) bool {
	return validID(s, true)
}

func validID(s string, punct bool) bool {
	if s == "" || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '-'):
		case i > 0 && punct && (c == '.' || c == ':'):
		default:
			return false
		}
	}
	return true
}
