package api

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as a string, in JSON (the API) and
// in TOML (legion.toml, where it is config.Duration): Go's syntax ("30s",
// "10m", "1h30m") or systemd's ("30 s", "2min 30s", "1d"), never negative.
// It implements encoding.TextMarshaler and TextUnmarshaler, so a decoder
// reports a bad value with its field or line. It is Legion's one duration
// type on the wire and in the config.
type Duration time.Duration

// UnmarshalText parses text with [ParseDuration].
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := ParseDuration(string(text))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration in Go's syntax, e.g. "10m0s".
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).String()), nil
}

// systemdUnits are the time units systemd.time(7) accepts, by name.
var systemdUnits = map[string]time.Duration{
	"us": time.Microsecond, "usec": time.Microsecond, "µs": time.Microsecond,
	"ms": time.Millisecond, "msec": time.Millisecond,
	"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// ParseDuration parses a non-negative duration in Go's syntax ("1h30m") or
// systemd's ("1h 30min", "2 days"). Every number needs a unit, except a
// plain "0".
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf(`empty duration: expected e.g. "30s", "10m" or "1h30m"`)
	}
	if d, err := time.ParseDuration(t); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("negative duration %q: expected zero or more", s)
		}
		return d, nil
	}
	d, ok := parseSystemdDuration(t)
	if !ok {
		return 0, fmt.Errorf(`invalid duration %q: expected e.g. "30s", "10m", "1h30m" or "2min 30s"`, s)
	}
	return d, nil
}

// parseSystemdDuration parses a sequence of "<number>[ ]<unit>" terms, as
// systemd.time(7) does, with fractions allowed ("1.5h").
func parseSystemdDuration(s string) (time.Duration, bool) {
	var total float64
	i := 0
	for {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i == len(s) {
			break
		}
		start := i
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		n, err := strconv.ParseFloat(s[start:i], 64)
		if err != nil {
			return 0, false
		}
		for i < len(s) && s[i] == ' ' {
			i++
		}
		start = i
		for i < len(s) && s[i] != ' ' && (s[i] < '0' || s[i] > '9') {
			i++
		}
		unit, ok := systemdUnits[s[start:i]]
		if !ok {
			return 0, false
		}
		total += n * float64(unit)
	}
	if total >= math.MaxInt64 {
		return 0, false
	}
	return time.Duration(total), true
}
