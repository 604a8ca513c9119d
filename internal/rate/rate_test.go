package rate

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

func TestBucket(t *testing.T) {
	r := Rate{PerSecond: 10, Burst: 5}
	var b Bucket
	for i := range 5 {
		if !b.Take(t0, r) {
			t.Fatalf("take %d of the burst refused", i)
		}
	}
	if b.Take(t0, r) {
		t.Fatal("take past the burst allowed")
	}
	if b.Take(t0.Add(50*time.Millisecond), r) {
		t.Fatal("half a token refilled, take allowed")
	}
	if !b.Take(t0.Add(100*time.Millisecond), r) {
		t.Fatal("a token refilled after 1/rate, take refused")
	}
	// Empty at 100 ms: full again half a second later.
	if b.Full(t0.Add(400*time.Millisecond), r) || !b.Full(t0.Add(600*time.Millisecond), r) {
		t.Error("Full is wrong")
	}
	// A long pause refills to the burst, no more.
	n := 0
	for b.Take(t0.Add(time.Hour), r) {
		n++
	}
	if n != 5 {
		t.Errorf("%d tokens after an hour, want the burst of 5", n)
	}
	if !(&Bucket{}).Take(t0, Rate{}) {
		t.Error("the zero Rate limits")
	}
}

func TestTakeN(t *testing.T) {
	r := Rate{PerSecond: 10, Burst: 8}
	var b Bucket
	if !b.TakeN(t0, r, 5) || b.TakeN(t0, r, 5) || !b.TakeN(t0, r, 3) {
		t.Fatal("TakeN does not take n of the burst")
	}
	// More than the burst takes a full bucket, and only a full one.
	if b.TakeN(t0.Add(700*time.Millisecond), r, 100) || !b.TakeN(t0.Add(800*time.Millisecond), r, 100) {
		t.Error("TakeN above the burst does not wait for a full bucket")
	}
}

func TestValidate(t *testing.T) {
	for _, r := range []Rate{{}, {PerSecond: 1, Burst: 1}, {PerSecond: 0.1, Burst: 100}} {
		if err := r.Validate(); err != nil {
			t.Errorf("%v: %v", r, err)
		}
	}
	for _, r := range []Rate{{PerSecond: 0, Burst: 1}, {PerSecond: 1, Burst: 0}, {PerSecond: -1, Burst: 5}} {
		if r.Validate() == nil {
			t.Errorf("%v: valid", r)
		}
	}
}

func TestTableBounded(t *testing.T) {
	tb := NewTable[string](Rate{PerSecond: 1, Burst: 2}, 100)
	for i := range 1000 {
		tb.Take(fmt.Sprint(i), t0)
		if tb.Len() > 100 {
			t.Fatalf("%d buckets, want at most 100", tb.Len())
		}
	}
	// Keys are separate.
	tb = NewTable[string](Rate{PerSecond: 1, Burst: 2}, 100)
	var got []bool
	for _, k := range []string{"a", "a", "a", "b"} {
		got = append(got, tb.Take(k, t0))
	}
	if want := []bool{true, true, false, true}; !slices.Equal(got, want) {
		t.Errorf("takes of a, a, a, b with a burst of 2: %v, want %v", got, want)
	}
	// Full buckets are dropped, and the others kept, by the next sweep.
	tb.Take("c", t0.Add(time.Second))
	tb.Take("d", t0.Add(20*time.Second))
	if tb.Len() != 1 {
		t.Errorf("%d buckets after the sweep, want 1 (d)", tb.Len())
	}
}
