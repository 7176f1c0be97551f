package api

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name    string
		wantErr string // "" means valid
	}{
		{"docs", ""},
		{"DEMO-12_plan.v2", ""},
		{"ünïcode", ""},
		{"", "empty"},
		{"a/b", "'/'"},
		{"..", "'..'"},
		{"a..b", "'..'"},
		{".", "'.'"},
		{"-x", "starts with '-'"},
		{"a b", "space"},
		{"a\tb", "control"},
		{"a\x1bb", "control"},
		{"a\u0085b", "control"},
		{strings.Repeat("x", 101), "at most 100"},
		{"\xff", "UTF-8"},
	}
	for _, tt := range tests {
		err := ValidateName(tt.name)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("ValidateName(%q) = %v; want nil", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ValidateName(%q) = %v; want an error containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestErrorIs(t *testing.T) {
	err := error(Errorf(CodeRecovering, "wait"))
	if !errors.Is(err, ErrRecovering) || errors.Is(err, ErrNotFound) {
		t.Errorf("errors.Is(%v, ErrRecovering/ErrNotFound) = %v/%v; want true/false", err, errors.Is(err, ErrRecovering), errors.Is(err, ErrNotFound))
	}
	if e := Errorf(CodeRecovering, "x"); !e.Retryable {
		t.Errorf("Errorf(recovering).Retryable = false; want true")
	}
	if e := Errorf(CodeNotFound, "x"); e.Retryable {
		t.Errorf("Errorf(not_found).Retryable = true; want false")
	}
}
