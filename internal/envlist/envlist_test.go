package envlist

import "testing"

func TestLookup(t *testing.T) {
	env := []string{"A=1", "B=", "A=2", "junk", "C=x=y"}
	for _, tt := range []struct {
		key, want string
		ok        bool
	}{
		{"A", "2", true}, // the last assignment wins
		{"B", "", true},  // set, empty
		{"C", "x=y", true},
		{"D", "", false},
		{"junk", "", false},
	} {
		if got, ok := Lookup(env, tt.key); got != tt.want || ok != tt.ok {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
}
