package diagnostics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// CheckerConfig is one checker of the --diagnostics file
// (docs/diagnostics.md, "Configuration").
type CheckerConfig struct {
	// Name names the checker in texts and metadata.
	Name string `json:"name"`
	// Glob selects the files it checks: without a "/" it matches the base
	// name, with one the path relative to the root ("**" spans folders);
	// "{a,b}" alternatives are expanded.
	Glob string `json:"glob"`
	// Command is the argv, run without a shell; placeholders are replaced
	// in every argument.
	Command []string `json:"command"`
	// Format names the output parser; "" is "line".
	Format string `json:"format"`
	// OKExit are the exit statuses of a run that answered even when it
	// printed nothing parsable; nil is [0, 1, 2].
	OKExit []int `json:"ok_exit"`
	// Read are more absolute paths the checker may read (a toolchain's
	// installation); folders are readable and executable beneath.
	Read []string `json:"read"`
	// Env adds to (or overrides) the checker's environment.
	Env map[string]string `json:"env"`
	// Stdin feeds the version checked on the checker's stdin (for a tool's
	// "--stdin --stdin-filename {path}" mode); else stdin is /dev/null.
	Stdin bool `json:"stdin"`
}

// defaultOKExit is ok_exit when the config gives none.
var defaultOKExit = []int{0, 1, 2}

// The output formats (docs/diagnostics.md, "Formats").
const (
	FormatLine            = "line"
	FormatShellcheckJSON1 = "shellcheck-json1"
	FormatESLintJSON      = "eslint-json"
	FormatPython          = "python"
)

var formats = []string{FormatLine, FormatShellcheckJSON1, FormatESLintJSON, FormatPython}

// maxConfigBytes bounds the --diagnostics file.
const maxConfigBytes = 1 << 20

var (
	nameRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	envKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// LoadConfig reads and checks a --diagnostics file. Its errors name the
// field at fault ("checkers[1].format: ..."); the caller adds the flag.
func LoadConfig(file string) ([]CheckerConfig, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxConfigBytes)
	}
	return ParseConfig(data)
}

// ParseConfig decodes a --diagnostics document strictly: no unknown field,
// no duplicate key, no trailing data, every field of the right type, then
// checks every value.
func ParseConfig(data []byte) ([]CheckerConfig, error) {
	if err := checkKeys(data); err != nil {
		return nil, err
	}
	var doc struct {
		Checkers *[]json.RawMessage `json:"checkers"`
	}
	if err := decodeStrict(data, &doc, ""); err != nil {
		return nil, err
	}
	if doc.Checkers == nil {
		return nil, errors.New(`checkers: missing (the document is {"checkers": [...]})`)
	}
	out := make([]CheckerConfig, 0, len(*doc.Checkers))
	seen := map[string]int{}
	for i, raw := range *doc.Checkers {
		at := "checkers[" + strconv.Itoa(i) + "]"
		var c CheckerConfig
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return nil, errors.New(at + ": want an object")
		}
		if err := decodeStrict(raw, &c, at+"."); err != nil {
			return nil, err
		}
		if err := c.check(at); err != nil {
			return nil, err
		}
		if j, dup := seen[c.Name]; dup {
			return nil, fmt.Errorf("%s.name: %q is already the name of checkers[%d]", at, c.Name, j)
		}
		seen[c.Name] = i
		out = append(out, c)
	}
	return out, nil
}

func (c *CheckerConfig) check(at string) error {
	switch {
	case c.Name == "":
		return errors.New(at + ".name: missing")
	case !nameRe.MatchString(c.Name):
		return fmt.Errorf("%s.name: %q is not 1-64 characters of A-Za-z0-9._- starting with a letter or digit", at, c.Name)
	case c.Glob == "":
		return errors.New(at + ".glob: missing")
	case len(c.Command) == 0:
		return errors.New(at + ".command: missing (a list of strings, the program first)")
	case c.Command[0] == "":
		return errors.New(at + ".command[0]: empty")
	}
	if err := validGlob(c.Glob); err != nil {
		return fmt.Errorf("%s.glob: %q: %w", at, c.Glob, err)
	}
	for i, a := range c.Command {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%s.command[%d]: contains a NUL byte", at, i)
		}
	}
	if c.Format == "" {
		c.Format = FormatLine
	}
	if !contains(formats, c.Format) {
		return fmt.Errorf("%s.format: unknown format %q (known: %s)", at, c.Format, strings.Join(formats, ", "))
	}
	if c.OKExit == nil {
		c.OKExit = defaultOKExit
	}
	for i, code := range c.OKExit {
		if code < 0 || code > 255 {
			return fmt.Errorf("%s.ok_exit[%d]: %d is not an exit status (0-255)", at, i, code)
		}
	}
	for i, p := range c.Read {
		if !filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
			return fmt.Errorf("%s.read[%d]: %q is not an absolute path", at, i, p)
		}
		c.Read[i] = filepath.Clean(p)
	}
	for k, v := range c.Env {
		if !envKeyRe.MatchString(k) {
			return fmt.Errorf("%s.env: %q is not an environment variable name", at, k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("%s.env.%s: contains a NUL byte", at, k)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// trailing data; errors name the field under prefix.
func decodeStrict(data []byte, v any, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, prefix)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

func decodeError(err error, prefix string) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = strings.TrimSuffix(prefix, ".")
			if field == "" {
				return fmt.Errorf("the document: got %s, want an object", jsonKind(te.Value))
			}
			return fmt.Errorf("%s: got %s, want an object", field, jsonKind(te.Value))
		}
		return fmt.Errorf("%s%s: got %s, want %s", prefix, field, jsonKind(te.Value), goKind(te.Type))
	case errors.As(err, &se):
		return fmt.Errorf("not valid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.EOF):
		return errors.New("empty document")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("not valid JSON: unexpected end of the document")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		where := strings.TrimSuffix(prefix, ".")
		if where == "" {
			return fmt.Errorf("unknown field %s", name)
		}
		return fmt.Errorf("%s: unknown field %s", where, name)
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

func jsonKind(v string) string {
	switch v {
	case "string":
		return "a string"
	case "number", "number int":
		return "a number"
	case "bool":
		return "a boolean"
	case "array":
		return "a list"
	case "object":
		return "an object"
	}
	if strings.HasPrefix(v, "number") {
		return "a number that is not an integer"
	}
	return v
}

func goKind(t reflect.Type) string {
	if t == reflect.TypeFor[json.RawMessage]() {
		return "an object"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int:
		return "an integer"
	case reflect.Slice:
		elem := goKind(t.Elem())
		return "a list of " + elem[strings.IndexByte(elem, ' ')+1:] + "s"
	case reflect.Map:
		return "an object of strings"
	case reflect.Struct:
		return "an object"
	}
	return t.String()
}

// checkKeys refuses an object with a key twice anywhere in the document;
// the error names the object.
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(at string) error
	walk = func(at string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			keys := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				child := k
				if at != "" {
					child = at + "." + k
				}
				if keys[k] {
					return duplicateKey(child)
				}
				keys[k] = true
				if err := walk(child); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(at + "[" + strconv.Itoa(i) + "]"); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	var dup duplicateKey
	if err := walk(""); errors.As(err, &dup) {
		return err
	}
	return nil // syntax errors are named by the decoder
}

// duplicateKey is a key met twice in one object, named by its path.
type duplicateKey string

func (d duplicateKey) Error() string { return string(d) + ": duplicate key" }

// maxGlobAlternatives bounds the expansion of "{a,b}" groups.
const maxGlobAlternatives = 64

// expandBraces expands the "{a,b}" groups of a glob (not nested).
func expandBraces(glob string) ([]string, error) {
	i := strings.IndexByte(glob, '{')
	if i < 0 {
		if strings.IndexByte(glob, '}') >= 0 {
			return nil, errors.New(`a "}" without "{"`)
		}
		return []string{glob}, nil
	}
	j := strings.IndexByte(glob[i:], '}')
	if j < 0 {
		return nil, errors.New(`a "{" without "}"`)
	}
	j += i
	inner := glob[i+1 : j]
	if strings.IndexByte(inner, '{') >= 0 {
		return nil, errors.New(`nested "{" groups`)
	}
	rest, err := expandBraces(glob[j+1:])
	if err != nil {
		return nil, err
	}
	var out []string
	for _, alt := range strings.Split(inner, ",") {
		for _, r := range rest {
			out = append(out, glob[:i]+alt+r)
			if len(out) > maxGlobAlternatives {
				return nil, fmt.Errorf("more than %d alternatives", maxGlobAlternatives)
			}
		}
	}
	return out, nil
}

func validGlob(glob string) error {
	alts, err := expandBraces(glob)
	if err != nil {
		return err
	}
	for _, g := range alts {
		if strings.HasPrefix(g, "/") {
			return errors.New("a glob is relative to the root; it cannot start with /")
		}
		for _, seg := range strings.Split(g, "/") {
			if _, err := path.Match(seg, ""); err != nil {
				return errors.New("malformed pattern")
			}
		}
	}
	return nil
}

// globMatcher matches root-relative slash paths against a checked glob.
type globMatcher []string

func newGlobMatcher(glob string) globMatcher {
	alts, _ := expandBraces(glob)
	return alts
}

func (m globMatcher) match(rel string) bool {
	for _, g := range m {
		if !strings.Contains(g, "/") {
			if ok, _ := path.Match(g, path.Base(rel)); ok {
				return true
			}
			continue
		}
		if matchSegments(strings.Split(g, "/"), strings.Split(rel, "/")) {
			return true
		}
	}
	return false
}

// matchSegments matches path segments, "**" standing for any number of
// them (none included).
func matchSegments(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for k := 0; k <= len(segs); k++ {
				if matchSegments(pat[1:], segs[k:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}
