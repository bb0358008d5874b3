package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// Error is every error Load and Parse return. It renders as one line:
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
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// translateDecodeError turns go-toml's errors, whose text names Go struct
// types and spans several lines, into an *Error written in the file's terms.
func translateDecodeError(file string, err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		first := &sm.Errors[0]
		line, _ := first.Position()
		msg := unknownKeyMessage(first)
		if n := len(sm.Errors) - 1; n > 0 {
			msg += fmt.Sprintf(" (and %d more unknown %s)", n, plural(n, "key", "keys"))
		}
		return &Error{File: file, Line: line, Msg: msg, Err: err}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		key := strings.Join(de.Key(), ".")
		return &Error{File: file, Line: line, Key: key, Msg: decodeMessage(de), Err: err}
	}
	return &Error{File: file, Msg: err.Error(), Err: err}
}

// unknownKeyMessage names the first key component the schema does not know,
// with its full dotted path and, when one is close, the key that was meant.
func unknownKeyMessage(de *toml.DecodeError) string {
	parts := de.Key()
	t := reflect.TypeOf(rawFile{})
	for i, p := range parts {
		st := tableType(t)
		if st == nil {
			break
		}
		f, ok := fieldByKey(st, p)
		if ok {
			t = f.Type
			continue
		}
		what := "key"
		if i < len(parts)-1 || strings.Contains(de.Error(), "missing table") {
			what = "table"
		}
		msg := fmt.Sprintf("unknown %s %q", what, strings.Join(parts[:i+1], "."))
		if s := closest(p, keysOf(st)); s != "" {
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
func decodeMessage(de *toml.DecodeError) string {
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	m := typeMismatch.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	found := article(m[1])
	t, ok := schemaType(de.Key())
	if !ok {
		return fmt.Sprintf("wrong type: found %s", found)
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Struct && !strings.HasPrefix(m[2], "[]") {
		found = "an array containing " + found
	}
	return fmt.Sprintf("expected %s, found %s", describe(t), found)
}

func schemaType(parts []string) (reflect.Type, bool) {
	if len(parts) == 0 {
		return nil, false
	}
	t := reflect.TypeOf(rawFile{})
	for _, p := range parts {
		st := tableType(t)
		if st == nil {
			return nil, false
		}
		f, ok := fieldByKey(st, p)
		if !ok {
			return nil, false
		}
		t = f.Type
	}
	return t, true
}

// tableType returns the struct type a TOML table of type t decodes into
// (through pointers and arrays of tables), or nil if t is not a table.
func tableType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	return t
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
	case reflect.Struct:
		return "a table"
	case reflect.Slice:
		e := t.Elem()
		for e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		switch e.Kind() {
		case reflect.Struct:
			return "an array of tables"
		case reflect.String:
			return "an array of strings"
		case reflect.Float64:
			return "an array of numbers"
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

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// closest returns the candidate nearest to s by edit distance if it is close
// enough to be a plausible typo, else "".
func closest(s string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(s, c)
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

// editDistance is the Damerau (optimal string alignment) distance, so that a
// swapped pair of letters counts as one typo.
func editDistance(a, b string) int {
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
