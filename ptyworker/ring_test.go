package ptyworker

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestRing(t *testing.T) {
	r := NewRing(8)
	r.Write([]byte("abc"))
	if got, err := r.ReadFrom(0); err != nil || string(got) != "abc" {
		t.Errorf("ReadFrom(0) = %q, %v; want abc", got, err)
	}
	r.Write([]byte("defghij")) // 10 bytes written, 8 kept
	if r.Head() != 10 || r.Oldest() != 2 {
		t.Errorf("Head, Oldest = %d, %d; want 10, 2", r.Head(), r.Oldest())
	}
	if got, err := r.ReadFrom(2); err != nil || string(got) != "cdefghij" {
		t.Errorf("ReadFrom(2) = %q, %v; want cdefghij", got, err)
	}
	if got, err := r.ReadFrom(7); err != nil || string(got) != "hij" {
		t.Errorf("ReadFrom(7) = %q, %v; want hij", got, err)
	}
	if _, err := r.ReadFrom(1); !errors.Is(err, ErrTooOld) {
		t.Errorf("ReadFrom(1) = %v; want ErrTooOld", err)
	}
	if got, err := r.ReadFrom(10); err != nil || len(got) != 0 {
		t.Errorf("ReadFrom(head) = %q, %v; want empty", got, err)
	}
	if _, err := r.ReadFrom(11); err == nil {
		t.Error("ReadFrom(past head) = nil error; want an error")
	}
	r.Write([]byte("0123456789ABCDEF")) // larger than the ring
	if got, _ := r.ReadFrom(r.Oldest()); string(got) != "89ABCDEF" || r.Head() != 26 {
		t.Errorf("after an oversized write ring = %q head %d; want 89ABCDEF head 26", got, r.Head())
	}
}

// TestRingMatchesStream checks random writes and reads against the plain
// stream they come from.
func TestRingMatchesStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := NewRing(1000)
	var stream []byte
	for i := range 2000 {
		p := make([]byte, rng.IntN(1500))
		for j := range p {
			p[j] = byte(i + j)
		}
		r.Write(p)
		stream = append(stream, p...)
		off := r.Oldest() + uint64(rng.IntN(int(r.Head()-r.Oldest()+1)))
		got, err := r.ReadFrom(off)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, stream[off:]) {
			t.Fatalf("write %d: ReadFrom(%d) differs from the stream", i, off)
		}
	}
}
