package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// From returns m with sender from and n raw bytes.
func From(m store.Message, from string, n int) store.Message {
	m.From = from
	m.Raw = make([]byte, n)
	copy(m.Raw, m.ID[:])
	return m
}

func checkUsage(t testing.TB, s *store.Store, space protocol.ID, want store.Usage) {
	t.Helper()
	if got, err := s.Usage(space); err != nil || got != want {
		t.Errorf("Usage(%s) = %+v, %v; want %+v", space, got, err, want)
	}
}

func checkSender(t testing.TB, s *store.Store, space protocol.ID, from string, want store.Usage) store.SenderUsage {
	t.Helper()
	got, err := s.SenderUsage(space, from)
	if err != nil || got.Usage != want {
		t.Errorf("SenderUsage(%s, %q) = %+v, %v; want %+v", space, from, got, err, want)
	}
	if (got.Count == 0) != (got.Since == 0) {
		t.Errorf("SenderUsage(%s, %q).Since = %d with %d messages", space, from, got.Since, got.Count)
	}
	return got
}

// testUsage counts what spaces and senders hold, once per message.
func testUsage(t *testing.T, open Opener) {
	clock := NewClock(1000)
	s := open(t, store.Options{Now: clock.Now, SweepInterval: -1})
	a, b := ID("usage a"), ID("usage b")
	checkUsage(t, s, a, store.Usage{})
	checkSender(t, s, a, "alice", store.Usage{})

	MustPut(t, s, From(Msg(a, "u1"), "alice", 100))
	clock.Set(2000)
	MustPut(t, s, From(Msg(a, "u2"), "alice", 50))
	MustPut(t, s, From(Msg(a, "u3"), "bob", 7))
	MustPut(t, s, From(Msg(b, "u4"), "alice", 1000))
	if _, added := MustPut(t, s, From(Msg(a, "u1"), "alice", 100)); added {
		t.Fatal("duplicate Put added")
	}
	checkUsage(t, s, a, store.Usage{Bytes: 157, Count: 3})
	checkUsage(t, s, b, store.Usage{Bytes: 1000, Count: 1})
	if got := checkSender(t, s, a, "alice", store.Usage{Bytes: 150, Count: 2}); got.Since != 1000 {
		t.Errorf("alice's Since = %d, want 1000 (when her first message was stored)", got.Since)
	}
	if got := checkSender(t, s, a, "bob", store.Usage{Bytes: 7, Count: 1}); got.Since != 2000 {
		t.Errorf("bob's Since = %d, want 2000", got.Since)
	}
	checkSender(t, s, b, "bob", store.Usage{})
}

// testQuota refuses a message that would pass its space's or its sender's
// quota, and stores everything else.
func testQuota(t *testing.T, open Opener) {
	s := open(t, store.Options{SweepInterval: -1})
	sp := ID("quota")
	q := store.Quota{SpaceBytes: 1000, SenderBytes: 400}
	put := func(name, from string, n int) error {
		_, _, err := s.PutWithin(t.Context(), From(Msg(sp, name), from, n), q)
		return err
	}
	for i := range 4 {
		if err := put(fmt.Sprint("a", i), "alice", 100); err != nil {
			t.Fatalf("alice's message %d: %v", i, err)
		}
	}
	if err := put("a4", "alice", 1); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("alice over her 400 bytes: %v, want ErrQuota", err)
	}
	if ok, _ := s.Has(ID("a4")); ok {
		t.Error("a message over quota was stored")
	}
	if err := put("b0", "bob", 400); err != nil {
		t.Fatalf("bob's first message: %v", err)
	}
	if err := put("c0", "carol", 300); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("carol's message past the space's 1000 bytes: %v, want ErrQuota", err)
	}
	if err := put("c1", "carol", 200); err != nil {
		t.Fatalf("carol's message up to the space's quota: %v", err)
	}
	checkUsage(t, s, sp, store.Usage{Bytes: 1000, Count: 6})
	// A message already stored is not refused: Put is idempotent.
	if _, added, err := s.PutWithin(t.Context(), From(Msg(sp, "a0"), "alice", 100), q); err != nil || added {
		t.Errorf("PutWithin of a stored message = %v, %v; want not added, no error", added, err)
	}
	// The default Put has no quota.
	MustPut(t, s, From(Msg(sp, "d0"), "dave", 5000))
	checkUsage(t, s, sp, store.Usage{Bytes: 6000, Count: 7})
}

// testQuotaConcurrent: concurrent PutWithins never take a space over its
// quota, and the counters equal what is stored.
func testQuotaConcurrent(t *testing.T, open Opener) {
	s := open(t, store.Options{SweepInterval: -1})
	sp := ID("quota race")
	const size, quota = 100, 2550 // room for 25 messages
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		stored int
	)
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				m := From(Msg(sp, fmt.Sprint("r", w, ".", i)), fmt.Sprint("w", w), size)
				_, added, err := s.PutWithin(t.Context(), m, store.Quota{SpaceBytes: quota})
				switch {
				case errors.Is(err, store.ErrQuota):
				case err != nil:
					t.Error(err)
				case added:
					mu.Lock()
					stored++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if stored != 25 {
		t.Errorf("%d messages stored, want 25 (quota %d, %d bytes each)", stored, quota, size)
	}
	checkUsage(t, s, sp, store.Usage{Bytes: int64(stored * size), Count: int64(stored)})
	if n := len(ReadAll(t, s, sp, 100)); n != stored {
		t.Errorf("Read finds %d messages, want %d", n, stored)
	}
}

// testUsageAfterSweep: messages removed by expiry and retention leave the
// counters, and a sender whose last message goes is forgotten.
func testUsageAfterSweep(t *testing.T, open Opener) {
	const t0 = 10_000
	clock := NewClock(t0)
	s := open(t, store.Options{Now: clock.Now, SweepInterval: -1, Retention: store.Retention{MaxCount: 2}})
	sp := ID("usage sweep")
	m1 := From(Msg(sp, "s1"), "alice", 10)
	m1.Time = t0
	m2 := From(Msg(sp, "s2"), "bob", 20)
	m2.Time, m2.Expires = t0+1, t0+50
	m3 := From(Msg(sp, "s3"), "alice", 30)
	m3.Time = t0 + 2
	m4 := From(Msg(sp, "s4"), "carol", 40)
	m4.Time = t0 + 3
	for _, m := range []store.Message{m1, m2, m3, m4} {
		MustPut(t, s, m)
	}
	checkUsage(t, s, sp, store.Usage{Bytes: 100, Count: 4})
	clock.Set(t0 + 100) // m2 expires; retention keeps the newest 2 of the rest
	if n, err := s.Sweep(t.Context()); err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2", n, err)
	}
	checkUsage(t, s, sp, store.Usage{Bytes: 70, Count: 2})
	checkSender(t, s, sp, "alice", store.Usage{Bytes: 30, Count: 1})
	checkSender(t, s, sp, "bob", store.Usage{})
	checkSender(t, s, sp, "carol", store.Usage{Bytes: 40, Count: 1})
	// Room freed is room to use again.
	if _, _, err := s.PutWithin(t.Context(), From(Msg(sp, "s5"), "bob", 30), store.Quota{SpaceBytes: 100}); err != nil {
		t.Errorf("PutWithin after the sweep freed room: %v", err)
	}
	checkSender(t, s, sp, "bob", store.Usage{Bytes: 30, Count: 1})
}

// testSetLimits keeps a space's limits with its record.
func testSetLimits(t *testing.T, open Opener) {
	s := open(t, store.Options{SweepInterval: -1})
	sp := ID("limits")
	l := store.SpaceLimits{MaxBytes: 1 << 20, MaxSenderBytes: 1 << 10, MaxMessageSize: 512}
	if _, err := s.SetLimits(sp, l); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetLimits on a space not joined: %v, want ErrNotFound", err)
	}
	if _, _, err := s.JoinSpace(store.Space{ID: sp, Name: "limits", Retention: store.Retention{MaxCount: 3}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SetLimits(sp, l)
	if err != nil || got.Limits != l || got.Retention.MaxCount != 3 {
		t.Fatalf("SetLimits = %+v, %v", got, err)
	}
	if got, err := s.Space(sp); err != nil || got.Limits != l {
		t.Errorf("Space after SetLimits = %+v, %v", got, err)
	}
	if _, err := s.SetLimits(sp, store.SpaceLimits{MaxBytes: -1}); err == nil {
		t.Error("negative limits accepted")
	}
	if _, err := s.SetLimits(sp, store.SpaceLimits{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Space(sp); !got.Limits.IsZero() {
		t.Errorf("limits after clearing: %+v", got.Limits)
	}
}
