// Package tomlerr gives braid's strict TOML files (the daemon's config, the
// lab's scenarios) one error style: a single line naming the file, the line
// where the decoder knows it, the dotted key, and the problem in the file's
// own terms rather than go-toml's Go type names.
package tomlerr

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	toml "github.com/pelletier/go-toml/v2"
)

// Error renders as one line:
//
//	client.toml: client.scheduler: unknown scheduler "fastest" (valid: ...)
//	x.toml: line 7: unknown key "shceduler"
type Error struct {
	File string
	// Line is 1-based, 0 when the problem is not tied to one line (most
	// validation errors, which name the key instead).
	Line int
	// Key is the dotted path of the offending value with array indices
	// (server.clients[1].allowed_ips[0]), "" when the error is not about one key.
	Key string
	Msg string
	// Err is the underlying error, if any (a file system error, for example).
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(": line ")
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.Key != "" {
		b.WriteString(": ")
		b.WriteString(oneLine(e.Key))
	}
	b.WriteString(": ")
	b.WriteString(oneLine(e.Msg))
	return b.String()
}

// oneLine escapes control characters (a quoted key or a file name may hold a
// newline) so that an error stays one line.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// FileError reports a file that could not be read. The path is already the
// error's File, so an *fs.PathError is reduced to its cause to avoid naming
// the path twice.
func FileError(path string, err error) *Error {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	return &Error{File: path, Msg: msg, Err: err}
}

// Decode decodes data into v, a pointer to the struct that mirrors the file,
// refusing unknown keys. Errors are *Error.
func Decode(file string, data []byte, v any) error {
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Translate(file, reflect.TypeOf(v), err)
	}
	return nil
}

// Translate turns a go-toml decode error, whose text names Go struct types
// and may span several lines, into an *Error written in the file's terms.
// schema is the type decoded into (the struct, or a pointer to it); its toml
// tags supply key names for "did you mean" hints and type descriptions.
func Translate(file string, schema reflect.Type, err error) *Error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		first := &sm.Errors[0]
		line, _ := first.Position()
		msg := unknownKeyMessage(schema, first)
		if n := len(sm.Errors) - 1; n > 0 {
			msg += fmt.Sprintf(" (and %d more unknown %s)", n, Plural(n, "key", "keys"))
		}
		return &Error{File: file, Line: line, Msg: msg, Err: err}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		key := strings.Join(de.Key(), ".")
		return &Error{File: file, Line: line, Key: key, Msg: decodeMessage(schema, de), Err: err}
	}
	return &Error{File: file, Msg: err.Error(), Err: err}
}

// unknownKeyMessage names the first key component the schema does not know,
// with its full dotted path and, when one is close, the key that was meant.
func unknownKeyMessage(schema reflect.Type, de *toml.DecodeError) string {
	parts := de.Key()
	t := schema
	for i, p := range parts {
		t = through(t)
		if t.Kind() == reflect.Map {
			// A map's keys are the file's to choose; the component names
			// an entry, and the entry's type continues the walk.
			t = t.Elem()
			continue
		}
		if t.Kind() != reflect.Struct {
			break
		}
		f, ok := fieldByKey(t, p)
		if ok {
			t = f.Type
			continue
		}
		what := "key"
		if i < len(parts)-1 || strings.Contains(de.Error(), "missing table") {
			what = "table"
		}
		msg := fmt.Sprintf("unknown %s %q", what, strings.Join(parts[:i+1], "."))
		if s := Closest(p, keysOf(t)); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return msg
	}
	// The schema knows every component but go-toml still refused it; fall
	// back to its own words.
	return fmt.Sprintf("unknown key %q", strings.Join(parts, "."))
}

var typeMismatch = regexp.MustCompile(`^cannot decode TOML (.+?) into .* of type (.+)$`)

// decodeMessage rewrites type mismatches as "expected X, found Y" using the
// schema rather than go-toml's Go type names; other messages (syntax errors,
// duplicate keys) only lose their "toml: " prefix.
func decodeMessage(schema reflect.Type, de *toml.DecodeError) string {
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	m := typeMismatch.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	found := article(m[1])
	t, ok := schemaType(schema, de.Key())
	if !ok {
		return fmt.Sprintf("wrong type: found %s", found)
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Struct && !strings.HasPrefix(m[2], "[]") {
		found = "an array containing " + found
	}
	return fmt.Sprintf("expected %s, found %s", describe(t), found)
}

func schemaType(schema reflect.Type, parts []string) (reflect.Type, bool) {
	if len(parts) == 0 {
		return nil, false
	}
	t := schema
	for _, p := range parts {
		t = through(t)
		switch t.Kind() {
		case reflect.Map:
			t = t.Elem()
		case reflect.Struct:
			f, ok := fieldByKey(t, p)
			if !ok {
				return nil, false
			}
			t = f.Type
		default:
			return nil, false
		}
	}
	return t, true
}

// through strips pointers and arrays of tables: a key inside [[a]] or *T
// belongs to the element type.
func through(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || (t.Kind() == reflect.Slice && isTable(t.Elem())) {
		t = t.Elem()
	}
	return t
}

func isTable(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct || t.Kind() == reflect.Map
}

func fieldByKey(st reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		if tomlName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func keysOf(st reflect.Type) []string {
	var out []string
	for i := 0; i < st.NumField(); i++ {
		if n := tomlName(st.Field(i)); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func tomlName(f reflect.StructField) string {
	n, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	return n
}

func describe(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return describe(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Struct, reflect.Map:
		return "a table"
	case reflect.Slice:
		e := t.Elem()
		for e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		switch e.Kind() {
		case reflect.Struct, reflect.Map:
			return "an array of tables"
		case reflect.String:
			return "an array of strings"
		case reflect.Float64:
			return "an array of numbers"
		case reflect.Int, reflect.Int64:
			return "an array of integers"
		case reflect.Slice:
			return "an array of arrays"
		}
		return "an array"
	}
	return t.String()
}

func article(noun string) string {
	if noun == "" {
		return noun
	}
	switch noun[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + noun
	}
	return "a " + noun
}

// Plural picks the word form for n, for messages that count things.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Closest returns the candidate nearest to s by edit distance if it is close
// enough to be a plausible typo, else "".
func Closest(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := EditDistance(s, c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	limit := len(s) / 3
	if limit < 1 {
		limit = 1
	}
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

// EditDistance is the Damerau (optimal string alignment) distance, so that a
// swapped pair of letters counts as one typo.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
