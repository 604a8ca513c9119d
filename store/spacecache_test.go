package store_test

import (
	"errors"
	"testing"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// Space caches records once read; every change of a record must show in
// the next Space, including leaving and joining again.
func TestSpaceSeesChanges(t *testing.T) {
	s := openMemory(t, store.Options{})
	id := protocol.SpaceID("cache")
	if _, _, err := s.JoinSpace(store.Space{ID: id, Name: "cache"}); err != nil {
		t.Fatal(err)
	}
	read := func() store.Space {
		t.Helper()
		sp, err := s.Space(id)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	read() // cached from here
	if _, err := s.SetRetention(id, store.Retention{MaxCount: 7}); err != nil {
		t.Fatal(err)
	}
	if got := read().Retention.MaxCount; got != 7 {
		t.Fatalf("after SetRetention: MaxCount %d, want 7", got)
	}
	if _, err := s.SetLimits(id, store.SpaceLimits{MaxBytes: 99}); err != nil {
		t.Fatal(err)
	}
	if got := read().Limits.MaxBytes; got != 99 {
		t.Fatalf("after SetLimits: MaxBytes %d, want 99", got)
	}
	if err := s.LeaveSpace(id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Space(id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after LeaveSpace: err %v, want ErrNotFound", err)
	}
	if _, _, err := s.JoinSpace(store.Space{ID: id, Name: "again"}); err != nil {
		t.Fatal(err)
	}
	if got := read().Name; got != "again" {
		t.Fatalf("after joining again: name %q, want again", got)
	}
}
