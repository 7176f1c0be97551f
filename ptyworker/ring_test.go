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

// TestRingRoomKeepsHeld: filling a Room changes none of the bytes the ring
// holds (the reader fills it without the lock while others read them), and
// Slices are what ReadAt copies.
func TestRingRoomKeepsHeld(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	r := NewRing(1000)
	var stream []byte
	for i := range 3000 {
		room := r.Room(1 + rng.IntN(2*RingSpare))
		if len(room) == 0 || len(room) > RingSpare {
			t.Fatalf("step %d: Room is %d bytes; want 1 to %d", i, len(room), RingSpare)
		}
		held, err := r.ReadFrom(r.Oldest())
		if err != nil {
			t.Fatal(err)
		}
		for j := range room {
			room[j] = 0xff
		}
		if again, _ := r.ReadFrom(r.Oldest()); !bytes.Equal(again, held) {
			t.Fatalf("step %d: filling a Room of %d bytes changed the bytes held", i, len(room))
		}
		n := rng.IntN(len(room) + 1)
		for j := range n {
			room[j] = byte(i + j)
		}
		r.Commit(n)
		stream = append(stream, room[:n]...)
		off := r.Oldest() + uint64(rng.IntN(int(r.Head()-r.Oldest()+1)))
		a, b, err := r.Slices(off, rng.IntN(1200))
		if err != nil {
			t.Fatal(err)
		}
		got := append(append([]byte(nil), a...), b...)
		if !bytes.Equal(got, stream[off:off+uint64(len(got))]) || len(got) > 0 && len(a) == 0 {
			t.Fatalf("step %d: Slices(%d) differ from the stream", i, off)
		}
	}
}
