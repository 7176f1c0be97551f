package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// ErrTeamExists is returned (wrapped) by AddTeam when the name is taken.
var ErrTeamExists = errors.New("team already exists")

// Error is one problem in a config file. Its text reads
// "FILE:LINE: KEY: what is wrong", e.g.
//
//	/home/u/.config/legion/legion.toml:12: teams.demo.stale_after: invalid duration "10 minutes": expected e.g. "30s", ...
type Error struct {
	File   string // the config file
	Line   int    // 1-based; 0 when unknown
	Column int    // 1-based, for syntax errors only; 0 when unknown
	Key    string // dotted key, e.g. teams.demo.stale_after; "" when none
	Err    error  // what is wrong and what was expected
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteString(":" + strconv.Itoa(e.Column))
		}
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// syntaxError is a TOML syntax error; it unwraps to the toml.ParseError.
type syntaxError struct{ pe toml.ParseError }

func (e *syntaxError) Error() string {
	return "invalid TOML: " + e.pe.Message
}

func (e *syntaxError) Unwrap() error { return e.pe }

// keyString renders a key path as TOML would write it (quoting parts that
// are not bare keys).
func keyString(path []string) string { return toml.Key(path).String() }

// describe names a decoded TOML value's type for error messages.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return fmt.Sprintf("string %q", v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return fmt.Sprintf("float %v", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case time.Time:
		return "datetime"
	case []any:
		return "array"
	case []map[string]any:
		return "array of tables"
	case map[string]any:
		return "table"
	}
	return fmt.Sprintf("%T", v)
}

// wrongType is the error for a value of the wrong TOML type.
func wrongType(want string, v any) error {
	return fmt.Errorf("expected %s, got %s", want, describe(v))
}
