package config

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30s", 30 * time.Second, true},
		{"10m", 10 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"1.5h", 90 * time.Minute, true},
		{"0", 0, true},
		{"2min 30s", 150 * time.Second, true},
		{"30 sec", 30 * time.Second, true},
		{"1h30min", 90 * time.Minute, true},
		{"2 days", 48 * time.Hour, true},
		{"1w", 7 * 24 * time.Hour, true},
		{" 5s ", 5 * time.Second, true},
		{"", 0, false},
		{"30", 0, false},
		{"-5s", 0, false},
		{"10 minutes please", 0, false},
		{"5 fortnights", 0, false},
		{"99999999999999999999h", 0, false},
		{"1.2.3s", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestDurationText(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("2min 30s")); err != nil || time.Duration(d) != 150*time.Second {
		t.Fatalf("UnmarshalText(2min 30s) = %v, %v; want 2m30s", time.Duration(d), err)
	}
	b, err := d.MarshalText()
	if err != nil || string(b) != "2m30s" {
		t.Errorf("MarshalText() = %q, %v; want %q", b, err, "2m30s")
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"4G", 4 << 30, true},
		{"512M", 512 << 20, true},
		{"1.5G", 3 << 29, true},
		{"64K", 64 << 10, true},
		{"1048576", 1 << 20, true},
		{"100B", 100, true},
		{"2 T", 2 << 40, true},
		{"", 0, false},
		{"G", 0, false},
		{"4g", 0, false},
		{"4GB", 0, false},
		{"-1G", 0, false},
		{".5G", 0, false},
		{"1.2.3G", 0, false},
		{"99999999999E", 0, false},
		{"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParsePercent(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"200%", 200, true},
		{"50%", 50, true},
		{"0%", 0, false},
		{"200", 0, false},
		{"1.5%", 0, false},
		{"%", 0, false},
	}
	for _, tt := range tests {
		got, err := ParsePercent(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// TestDetachKey: worker.detach_key takes every key --detach-key takes
// (config had a parser of its own, which refused ctrl-space and ctrl-@).
func TestDetachKey(t *testing.T) {
	tests := []struct{ toml, want string }{
		{`"ctrl-\\"`, `ctrl-\`},
		{`"ctrl-q"`, "ctrl-q"},
		{`"Ctrl-Q"`, "ctrl-q"},
		{`"^A"`, "ctrl-a"},
		{`"ctrl-@"`, "ctrl-@"},
		{`"ctrl-space"`, "ctrl-space"},
		{`"c-z"`, "ctrl-z"},
	}
	for _, tt := range tests {
		path, _ := writeConfig(t, "[worker]\ndetach_key = "+tt.toml+"\n")
		cfg, err := Load(path)
		if err != nil {
			t.Errorf("Load(detach_key = %s) = %v", tt.toml, err)
			continue
		}
		if got := cfg.Worker.DetachKey.String(); got != tt.want {
			t.Errorf("Load(detach_key = %s) key = %q; want %q", tt.toml, got, tt.want)
		}
	}
}
