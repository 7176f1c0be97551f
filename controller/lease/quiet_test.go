package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestQuietCancel(t *testing.T) {
	tests := []struct {
		name  string
		level slog.Level
		err   error
		want  string // "" for nothing logged
	}{
		{"canceled error dropped at info", slog.LevelError, fmt.Errorf("get lease: %w", context.Canceled), ""},
		{"other error kept", slog.LevelError, errors.New("connection refused"), "level=ERROR"},
		{"deadline kept", slog.LevelInfo, context.DeadlineExceeded, "level=INFO"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(quietCancel{slog.NewTextHandler(&buf, nil)}).With("lease", "ns/n")
			log.Log(t.Context(), tt.level, "Error retrieving lease lock", "err", tt.err)
			got := buf.String()
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("logging %v at %v wrote %q; want %q", tt.err, tt.level, got, tt.want)
			}
		})
	}
	var buf bytes.Buffer
	slog.New(quietCancel{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})}).Error("stop", "err", context.Canceled)
	if !strings.Contains(buf.String(), "level=DEBUG") {
		t.Errorf("a canceled error with Debug enabled wrote %q; want it at DEBUG", buf.String())
	}
}
