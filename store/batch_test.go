package store

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

// TestBatchSiblingsShareParent: messages of one batch that name the same
// stored parents (siblings: messages sent at once name the same heads)
// leave the heads, on disk and cached, as the same messages put one at a
// time do, and so does the parent they name that is stored later. The
// batch reads each such parent once (see batchOnce); what it writes of it
// must depend on that read and on the siblings written before.
func TestBatchSiblingsShareParent(t *testing.T) {
	sp := protocol.MessageID([]byte("space"))
	msg := func(name string, prev ...Message) Message {
		m := syncTestMsg(sp, name)
		for _, p := range prev {
			m.Prev = append(m.Prev, p.ID)
		}
		return m
	}
	head := msg("head")                  // stored, a head
	named := msg("named")                // stored, already named by a stored child
	child := msg("child", named)         // stored
	absent := msg("absent")              // not stored when the batch comes
	s1 := msg("s1", head)                // siblings naming head
	s2 := msg("s2", head, named)         // and named
	s3 := msg("s3", named, head, absent) // and the absent one
	s4 := msg("s4", absent)
	before := []Message{head, named, child}
	batch := []Message{s1, s2, s3, s4}

	heads := func(t *testing.T, s *Store) (cached, disk []protocol.ID) {
		t.Helper()
		cached, err := s.Heads(sp)
		if err != nil {
			t.Fatal(err)
		}
		if disk, err = s.readHeads(sp); err != nil {
			t.Fatal(err)
		}
		return cached, disk
	}
	open := func(t *testing.T) *Store {
		s, err := Open(Options{Dir: t.TempDir(), SyncInterval: time.Hour, SweepInterval: -1, GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		for _, m := range before {
			if _, _, err := s.PutRelayed(t.Context(), m, Quota{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Heads(sp); err != nil { // cached from here on
			t.Fatal(err)
		}
		return s
	}

	one := open(t) // the reference: one message at a time
	for _, m := range batch {
		if _, _, err := one.PutRelayed(t.Context(), m, Quota{}); err != nil {
			t.Fatal(err)
		}
	}
	b := open(t)
	res, err := b.PutBatch(t.Context(), batch, Quota{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Added {
			t.Fatalf("batch message %d: added %v, %v", i, r.Added, r.Err)
		}
	}
	wantCached, wantDisk := heads(t, one)
	want := []protocol.ID{child.ID, s1.ID, s2.ID, s3.ID, s4.ID}
	slices.SortFunc(want, func(a, b protocol.ID) int { return bytes.Compare(a[:], b[:]) })
	if !slices.Equal(wantCached, want) || !slices.Equal(wantDisk, want) {
		t.Fatalf("reference heads: cached %v, disk %v; want %v", wantCached, wantDisk, want)
	}
	if cached, disk := heads(t, b); !slices.Equal(cached, want) || !slices.Equal(disk, want) {
		t.Errorf("heads after the batch: cached %v, on disk %v; want %v", cached, disk, want)
	}
	// Each parent's children index, as the reference's.
	for _, p := range []Message{head, named, absent} {
		want, err := one.keyIDs(idKey(prefixChild, p.ID), -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.keyIDs(idKey(prefixChild, p.ID), -1)
		if err != nil || !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("children of %s after the batch: %v, %v; want %v", p.Raw, got, err, want)
		}
	}
	// The absent parent, stored now, is named: no head.
	for _, s := range []*Store{one, b} {
		if _, _, err := s.PutRelayed(t.Context(), absent, Quota{}); err != nil {
			t.Fatal(err)
		}
	}
	if cached, disk := heads(t, b); !slices.Equal(cached, want) || !slices.Equal(disk, want) {
		t.Errorf("heads once the named parent is stored: cached %v, on disk %v; want %v", cached, disk, want)
	}
}

// TestBatchUsageOnDisk: a batch writes each counter it charged once, with
// the totals of all its messages (from several senders, in two spaces),
// less those refused over their quota: a reopened store reads what the
// book held.
func TestBatchUsageOnDisk(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	sp1, sp2 := protocol.SpaceID("one"), protocol.SpaceID("two")
	type want struct {
		space protocol.ID
		from  string
	}
	var ms []Message
	for i, w := range []want{{sp1, "a"}, {sp1, "b"}, {sp2, "a"}, {sp1, "a"}, {sp2, "c"}, {sp1, "c"}, {sp1, "a"}, {sp1, "a"}} {
		ms = append(ms, Message{ID: protocol.MessageID([]byte{byte(i)}), Space: w.space, From: w.from, Raw: make([]byte, 100*(i+1))})
	}
	ms = append(ms, ms[1]) // twice in the batch: counted once
	// a holds 100+400 in sp1 when its next (700) comes: over 1,000, refused,
	// and so is its last (800); b and c fit.
	res, err := s.PutBatch(t.Context(), ms, Quota{SenderBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	spaceWant := map[protocol.ID]Usage{}
	senderWant := map[want]Usage{}
	for i, r := range res[:len(res)-1] {
		m := ms[i]
		if i == 6 || i == 7 {
			if !errors.Is(r.Err, ErrQuota) {
				t.Fatalf("message %d: %v, want a quota refusal", i, r.Err)
			}
			continue
		}
		if r.Err != nil || !r.Added {
			t.Fatalf("message %d: added %v, %v", i, r.Added, r.Err)
		}
		u := spaceWant[m.Space]
		spaceWant[m.Space] = Usage{Bytes: u.Bytes + int64(len(m.Raw)), Count: u.Count + 1}
		k := want{m.Space, m.From}
		u = senderWant[k]
		senderWant[k] = Usage{Bytes: u.Bytes + int64(len(m.Raw)), Count: u.Count + 1}
	}
	since := map[want]int64{}
	check := func(s *Store, when string) {
		t.Helper()
		for sp, w := range spaceWant {
			if got, err := s.Usage(sp); err != nil || got != w {
				t.Errorf("%s: usage of %s = %+v, %v; want %+v", when, sp, got, err, w)
			}
		}
		for k, w := range senderWant {
			got, err := s.SenderUsage(k.space, k.from)
			if err != nil || got.Usage != w || got.Since == 0 {
				t.Errorf("%s: usage of %s in %s = %+v, %v; want %+v since a time", when, k.from, k.space, got, err, w)
			}
			if since[k] == 0 {
				since[k] = got.Since
			} else if got.Since != since[k] {
				t.Errorf("%s: %s in %s since %d, was %d", when, k.from, k.space, got.Since, since[k])
			}
		}
	}
	check(s, "after the batch")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir)
	defer s.Close()
	check(s, "after reopening")
}
