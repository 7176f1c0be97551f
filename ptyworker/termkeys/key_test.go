package termkeys

import "testing"

func TestParseKey(t *testing.T) {
	tests := []struct {
		in      string
		name    string
		raw     byte
		wantErr bool
	}{
		{`ctrl-\`, `ctrl-\`, 0x1c, false},
		{`CTRL+\`, `ctrl-\`, 0x1c, false},
		{"ctrl-]", "ctrl-]", 0x1d, false},
		{"ctrl-a", "ctrl-a", 0x01, false},
		{"Ctrl-A", "ctrl-a", 0x01, false},
		{"^Q", "ctrl-q", 0x11, false},
		{"c-z", "ctrl-z", 0x1a, false},
		{"ctrl-@", "ctrl-@", 0x00, false},
		{"ctrl-space", "ctrl-space", 0x00, false},
		{"ctrl-^", "ctrl-^", 0x1e, false},
		{"ctrl-_", "ctrl-_", 0x1f, false},
		{" ctrl-b ", "ctrl-b", 0x02, false},
		{"ctrl-[", "", 0, true},
		{"ctrl-m", "", 0, true},
		{"ctrl-i", "", 0, true},
		{"ctrl-j", "", 0, true},
		{"ctrl-h", "", 0, true},
		{"ctrl-1", "", 0, true},
		{"ctrl-ab", "", 0, true},
		{"ctrl-", "", 0, true},
		{"a", "", 0, true},
		{"", "", 0, true},
		{"alt-x", "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			k, err := ParseKey(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseKey(%q) error = %v; want error %v", tt.in, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if k.String() != tt.name || k.Raw() != tt.raw {
				t.Errorf("ParseKey(%q) = %q raw %#x; want %q raw %#x", tt.in, k, k.Raw(), tt.name, tt.raw)
			}
			again, err := ParseKey(k.String())
			if err != nil || again.String() != k.String() {
				t.Errorf("ParseKey(%q) = %v, %v; want the same key back", k.String(), again, err)
			}
		})
	}
}

func TestDefaultKey(t *testing.T) {
	if k := MustParseKey(DefaultKey); k.Raw() != 0x1c {
		t.Errorf("MustParseKey(DefaultKey).Raw() = %#x; want 0x1c", k.Raw())
	}
}
