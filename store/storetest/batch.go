package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// randomGraph returns n messages over spaces, each naming up to three
// earlier ones (of any space) and now and then one that never arrives,
// in creation order.
func randomGraph(rng *rand.Rand, prefix string, n int, spaces []protocol.ID) []store.Message {
	ms := make([]store.Message, n)
	for i := range ms {
		var prev []protocol.ID
		for range rng.IntN(4) {
			if i > 0 {
				prev = append(prev, ms[rng.IntN(i)].ID)
			}
		}
		if rng.IntN(10) == 0 {
			prev = append(prev, ID(fmt.Sprintf("%s/missing/%d", prefix, i)))
		}
		m := Msg(spaces[rng.IntN(len(spaces))], fmt.Sprintf("%s/%d", prefix, i), prev...)
		m.Time = int64(i)
		m.From = fmt.Sprintf("sender%d", rng.IntN(3))
		ms[i] = m
	}
	return ms
}

// checkSameState fails t unless got and want hold the same messages of
// each space, with the same heads, usage and sync keys, and got's order
// lists each message once.
func checkSameState(t *testing.T, got, want *store.Store, spaces []protocol.ID) {
	t.Helper()
	for _, sp := range spaces {
		gh, err1 := got.Heads(sp)
		wh, err2 := want.Heads(sp)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !slices.Equal(gh, wh) {
			t.Errorf("space %s: heads %v, want %v", sp, gh, wh)
		}
		gIDs := ids(ReadAll(t, got, sp, 7))
		wIDs := ids(ReadAll(t, want, sp, 7))
		slices.SortFunc(gIDs, compareID)
		slices.SortFunc(wIDs, compareID)
		if !slices.Equal(gIDs, wIDs) {
			t.Errorf("space %s: order holds %d messages, want %d", sp, len(gIDs), len(wIDs))
		}
		gu, err1 := got.Usage(sp)
		wu, err2 := want.Usage(sp)
		if err1 != nil || err2 != nil || gu != wu {
			t.Errorf("space %s: usage %+v (%v), want %+v (%v)", sp, gu, err1, wu, err2)
		}
		gk, err1 := got.Keys(sp, protocol.SyncKey{}, protocol.MaxSyncKey, 1<<20)
		wk, err2 := want.Keys(sp, protocol.SyncKey{}, protocol.MaxSyncKey, 1<<20)
		if err1 != nil || err2 != nil || !slices.Equal(gk, wk) {
			t.Errorf("space %s: %d sync keys (%v), want %d (%v)", sp, len(gk), err1, len(wk), err2)
		}
	}
}

func compareID(a, b protocol.ID) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}

// testBatchModel checks that PutBatch leaves a store as Put of each
// message does, whatever the order within batches, with messages stored
// before, repeated within a batch, and heads cached or not.
func testBatchModel(t *testing.T, open Opener) {
	spaces := []protocol.ID{ID("batch/a"), ID("batch/b")}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 16))
			ms := randomGraph(rng, fmt.Sprint("model", seed), 600, spaces)
			ref := open(t, store.Options{})
			for _, m := range ms {
				MustPut(t, ref, m)
			}
			cached := open(t, store.Options{})   // heads read before the batches
			uncached := open(t, store.Options{}) // heads read after
			before := rng.IntN(100)
			for _, s := range []*store.Store{cached, uncached} {
				for _, m := range ms[:before] {
					MustPut(t, s, m)
				}
			}
			for _, sp := range spaces {
				if _, err := cached.Heads(sp); err != nil {
					t.Fatal(err)
				}
			}
			// Everything (the ones stored before too) in shuffled
			// batches of random sizes, some messages twice.
			rest := slices.Clone(ms)
			for range 50 {
				rest = append(rest, ms[rng.IntN(len(ms))])
			}
			rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
			for len(rest) > 0 {
				n := min(len(rest), 1+rng.IntN(300))
				batch := rest[:n]
				rest = rest[n:]
				for _, s := range []*store.Store{cached, uncached} {
					res, err := s.PutBatch(t.Context(), batch, store.Quota{})
					if err != nil {
						t.Fatalf("PutBatch: %v", err)
					}
					for i, r := range res {
						if r.Err != nil || r.Entry.ID != batch[i].ID {
							t.Fatalf("PutBatch result %d: %+v", i, r)
						}
					}
				}
			}
			checkSameState(t, cached, ref, spaces)
			checkSameState(t, uncached, ref, spaces)
		})
	}
}

// testBatchAdded checks what PutBatch reports: added once per new
// message (not for one stored before, nor for a second copy), cursors
// that read back the message, and a wake-up of Changed.
func testBatchAdded(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	sp := ID("batch/added")
	a, b, c := Msg(sp, "ba"), Msg(sp, "bb"), Msg(sp, "bc")
	MustPut(t, s, a)
	changed := s.Changed(sp)
	res, err := s.PutBatch(t.Context(), []store.Message{b, a, c, b, {Space: sp}}, store.Quota{})
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, false, true, false}
	for i, w := range want {
		if res[i].Added != w || res[i].Err != nil {
			t.Errorf("result %d: added %v (err %v), want %v", i, res[i].Added, res[i].Err, w)
		}
	}
	if res[4].Err == nil {
		t.Error("a message with a zero ID: no error")
	}
	select {
	case <-changed:
	default:
		t.Error("Changed not woken by PutBatch")
	}
	if res[0].Entry.Cursor == res[2].Entry.Cursor || res[0].Entry.Cursor == 0 {
		t.Errorf("cursors %d and %d", res[0].Entry.Cursor, res[2].Entry.Cursor)
	}
	got, _, err := s.Read(sp, res[0].Entry.Cursor-1, 1)
	if err != nil || len(got) != 1 || got[0].ID != b.ID {
		t.Errorf("read at b's cursor: %v %v", got, err)
	}
	if n, err := s.Count(sp); err != nil || n != 3 {
		t.Errorf("Count = %d (%v), want 3", n, err)
	}
}

// testBatchQuota checks that PutBatch refuses exactly the messages over
// the quota, as Put would in the same order, and stores the others.
func testBatchQuota(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	ref := open(t, store.Options{})
	sp := ID("batch/quota")
	var ms []store.Message
	for i := range 40 {
		m := Msg(sp, fmt.Sprintf("q%02d", i))
		m.From = fmt.Sprintf("s%d", i%2)
		if i%2 == 1 {
			m.Raw = append(m.Raw, make([]byte, 100)...) // s1 fills its share first
		}
		ms = append(ms, m)
	}
	q := store.Quota{SpaceBytes: 2000, SenderBytes: 1200}
	res, err := s.PutBatch(t.Context(), ms, q)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i, m := range ms {
		_, added, err := ref.PutWithin(t.Context(), m, q)
		if errors.Is(err, store.ErrQuota) != errors.Is(res[i].Err, store.ErrQuota) || added != res[i].Added {
			t.Errorf("message %d: batch added %v err %v; Put added %v err %v", i, res[i].Added, res[i].Err, added, err)
		}
		if res[i].Err != nil {
			refused++
		}
	}
	if refused == 0 || refused == len(ms) {
		t.Fatalf("%d of %d refused: the quota does not bite", refused, len(ms))
	}
	checkSameState(t, s, ref, []protocol.ID{sp})
	if u, _ := s.Usage(sp); u.Bytes > q.SpaceBytes {
		t.Errorf("usage %d bytes over the quota %d", u.Bytes, q.SpaceBytes)
	}
}

// testBatchTooBig checks that a batch too big for one Badger transaction
// (many keys per message: a long Prev each) is stored all the same.
func testBatchTooBig(t *testing.T, open Opener) {
	s := open(t, store.Options{})
	ref := open(t, store.Options{})
	sp := ID("batch/big")
	var ms []store.Message
	for i := range 256 {
		var prev []protocol.ID
		for j := range 60 {
			prev = append(prev, ID(fmt.Sprintf("big/parent/%d/%d", i, j)))
		}
		ms = append(ms, Msg(sp, fmt.Sprintf("big/%d", i), prev...))
	}
	res, err := s.PutBatch(t.Context(), ms, store.Quota{})
	if err != nil {
		t.Fatalf("PutBatch: %v", err)
	}
	for i, r := range res {
		if !r.Added || r.Err != nil {
			t.Fatalf("message %d: added %v err %v", i, r.Added, r.Err)
		}
		MustPut(t, ref, ms[i])
	}
	checkSameState(t, s, ref, []protocol.ID{sp})
}
