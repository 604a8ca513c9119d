package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// checkAllKeys checks every message-related key against the stored
// records.
func checkAllKeys(t *testing.T, s *Store) {
	t.Helper()
	type rec struct {
		e      Entry
		chunks int
		size   int64
	}
	recs := map[protocol.ID]rec{}
	keys := map[byte][][]byte{}
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			keys[k[0]] = append(keys[k[0]], k)
			if k[0] == prefixMessage && len(k) == 1+protocol.IDSize {
				id := protocol.ID(k[1:])
				val, err := it.Item().ValueCopy(nil)
				if err != nil {
					return err
				}
				e, n, size, err := decodeRecordSize(id, val)
				if err != nil {
					return err
				}
				recs[id] = rec{e, n, size}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	has := func(k []byte) bool {
		for _, x := range keys[k[0]] {
			if bytes.Equal(x, k) {
				return true
			}
		}
		return false
	}
	errs := 0
	bad := func(f string, a ...any) {
		errs++
		if errs < 20 {
			t.Errorf(f, a...)
		}
	}
	childOf := map[protocol.ID]int{}
	type su struct {
		sp   protocol.ID
		from string
	}
	spaceUse := map[protocol.ID]Usage{}
	senderUse := map[su]Usage{}
	for id, r := range recs {
		e := r.e
		if !has(orderKey(e.Space, uint64(e.Cursor))) {
			bad("%x: no order key", id[:4])
		}
		if !has(timeKey(e.Space, e.SyncKey())) {
			bad("%x: no time key", id[:4])
		}
		if e.Expires != 0 && !has(expiryKey(e.Expires, id)) {
			bad("%x: no expiry key", id[:4])
		}
		for i := range r.chunks {
			if !has(dataKey(id, i)) {
				bad("%x: no data key %d", id[:4], i)
			}
		}
		for _, to := range e.ReplyTo {
			if !has(replyKey(to, id)) {
				bad("%x: no reply key", id[:4])
			}
		}
		for i, p := range e.Prev {
			if p == id || p.IsZero() || containsID(e.Prev[:i], p) {
				continue
			}
			if !has(childKey(p, id)) {
				bad("%x: no child key under parent %x", id[:4], p[:4])
			}
		}
		u := spaceUse[e.Space]
		spaceUse[e.Space] = Usage{u.Bytes + r.size, u.Count + 1}
		k := su{e.Space, e.From}
		u = senderUse[k]
		senderUse[k] = Usage{u.Bytes + r.size, u.Count + 1}
	}
	for _, k := range keys[prefixOrder] {
		sp := protocol.ID(k[1 : 1+protocol.IDSize])
		seq, _ := orderKeySeq(k)
		found := false
		for _, r := range recs {
			if r.e.Space == sp && uint64(r.e.Cursor) == seq {
				found = true
			}
		}
		if !found {
			bad("order key %d of a message not stored", seq)
		}
	}
	for _, k := range keys[prefixTime] {
		sk, _ := timeKeySync(k)
		if _, ok := recs[sk.ID]; !ok {
			bad("time key of %x, not stored", sk.ID[:4])
		}
	}
	for _, k := range keys[prefixExpiry] {
		_, id, _ := expiryKeyParts(k)
		if _, ok := recs[id]; !ok {
			bad("expiry key of %x, not stored", id[:4])
		}
	}
	for _, k := range keys[prefixData] {
		id := protocol.ID(k[1 : 1+protocol.IDSize])
		if r, ok := recs[id]; !ok {
			bad("data key of %x, not stored", id[:4])
		} else if int(k[len(k)-1]) >= r.chunks {
			bad("data key %d of %x, whose record has %d chunks", k[len(k)-1], id[:4], r.chunks)
		}
	}
	for _, k := range keys[prefixReply] {
		id := protocol.ID(k[1+protocol.IDSize:])
		if _, ok := recs[id]; !ok {
			bad("reply key of %x, not stored", id[:4])
		}
	}
	for _, k := range keys[prefixChild] {
		p := protocol.ID(k[1 : 1+protocol.IDSize])
		c := protocol.ID(k[1+protocol.IDSize:])
		r, ok := recs[c]
		if !ok || !slices.Contains(r.e.Prev, p) {
			bad("child key %x→%x: child not stored or not naming it", p[:4], c[:4])
		}
		childOf[p]++
	}
	refs := map[protocol.ID]bool{}
	for _, k := range keys[prefixRef] {
		p := protocol.ID(k[1:])
		refs[p] = true
		if childOf[p] == 0 {
			bad("r key of %x without any child key (stored %v)", p[:4], recs[p].e.ID == p)
		}
	}
	for p := range childOf {
		if !refs[p] {
			bad("%x has child keys and no r key", p[:4])
		}
	}
	heads := map[protocol.ID]bool{}
	for _, k := range keys[prefixHead] {
		sp := protocol.ID(k[1 : 1+protocol.IDSize])
		id := protocol.ID(k[1+protocol.IDSize:])
		heads[id] = true
		r, ok := recs[id]
		if !ok || r.e.Space != sp || refs[id] {
			bad("head key %x: stored %v referenced %v", id[:4], ok, refs[id])
		}
	}
	for id := range recs {
		if !refs[id] && !heads[id] {
			bad("%x stored, not referenced, no head key", id[:4])
		}
	}
	// Usage.
	for _, k := range keys[prefixUsage] {
		sp := protocol.ID(k[1:])
		u, err := s.Usage(sp)
		if err != nil {
			t.Fatal(err)
		}
		if u != spaceUse[sp] {
			bad("usage of %x: book %+v, truth %+v", sp[:4], u, spaceUse[sp])
		}
	}
	for sp, want := range spaceUse {
		var got Usage
		err := s.db.View(func(txn *badger.Txn) error {
			val, err := get(txn, usageKey(sp))
			if err != nil {
				return err
			}
			got, err = decodeUsage(val)
			return err
		})
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		if got != want {
			bad("usage key of %x: %+v, truth %+v", sp[:4], got, want)
		}
	}
	for k, want := range senderUse {
		got, err := s.SenderUsage(k.sp, k.from)
		if err != nil {
			t.Fatal(err)
		}
		if got.Usage != want {
			bad("sender %q in %x: %+v, truth %+v", k.from, k.sp[:4], got.Usage, want)
		}
	}
	// Range indexes that are built.
	s.indexMu.Lock()
	ixs := map[protocol.ID]*rangeIndex{}
	for sp, ix := range s.indexes {
		ixs[sp] = ix
	}
	s.indexMu.Unlock()
	for sp, ix := range ixs {
		<-ix.ready
		var truth []protocol.SyncKey
		for _, r := range recs {
			if r.e.Space == sp {
				truth = append(truth, r.e.SyncKey())
			}
		}
		ix.mu.Lock()
		n := ix.list.n
		ix.mu.Unlock()
		if n != len(truth) {
			bad("range index of %x counts %d, truth %d", sp[:4], n, len(truth))
		}
	}
	if errs > 0 {
		t.Errorf("%d inconsistencies", errs)
	}
}

// TestDeleteWindows puts, between a delete's reads and its commit,
// each kind of related message through each way of putting, then checks
// every key and the heads.
func TestDeleteWindows(t *testing.T) {
	type tc struct {
		name   string
		stored func(sp protocol.ID) []Message // put first, in order
		del    []string                       // names deleted
		during func(sp protocol.ID) []Message
	}
	m := func(sp protocol.ID, name string, prev ...string) Message {
		x := syncTestMsg(sp, name)
		for _, p := range prev {
			x.Prev = append(x.Prev, protocol.MessageID([]byte(p)))
		}
		return x
	}
	cases := []tc{
		{"child of a cached head deleted", func(sp protocol.ID) []Message { return []Message{m(sp, "p")} }, []string{"p"},
			func(sp protocol.ID) []Message { return []Message{m(sp, "c", "p")} }},
		{"child of a parent whose only child is deleted", func(sp protocol.ID) []Message { return []Message{m(sp, "p"), m(sp, "x", "p")} }, []string{"x"},
			func(sp protocol.ID) []Message { return []Message{m(sp, "c", "p")} }},
		{"missing parent of the deleted", func(sp protocol.ID) []Message { return []Message{m(sp, "x", "p")} }, []string{"x"},
			func(sp protocol.ID) []Message { return []Message{m(sp, "p")} }},
		{"child of a parent deleted with its only child", func(sp protocol.ID) []Message { return []Message{m(sp, "p"), m(sp, "x", "p")} }, []string{"x", "p"},
			func(sp protocol.ID) []Message { return []Message{m(sp, "c", "p")} }},
		{"child of the deleted head", func(sp protocol.ID) []Message { return []Message{m(sp, "p"), m(sp, "x", "p")} }, []string{"x"},
			func(sp protocol.ID) []Message { return []Message{m(sp, "c", "x")} }},
		{"child of both", func(sp protocol.ID) []Message { return []Message{m(sp, "p"), m(sp, "x", "p")} }, []string{"x"},
			func(sp protocol.ID) []Message { return []Message{m(sp, "c", "x", "p")} }},
		{"a chain onto the orphaned parent", func(sp protocol.ID) []Message { return []Message{m(sp, "p"), m(sp, "x", "p")} }, []string{"x"},
			func(sp protocol.ID) []Message { return []Message{m(sp, "c", "p"), m(sp, "d", "c")} }},
		{"parent and child deleted, grandparent", func(sp protocol.ID) []Message {
			return []Message{m(sp, "g"), m(sp, "p", "g"), m(sp, "x", "p")}
		}, []string{"x", "p"},
			func(sp protocol.ID) []Message { return []Message{m(sp, "c", "g")} }},
		{"the deleted itself", func(sp protocol.ID) []Message { return []Message{m(sp, "p"), m(sp, "x", "p")} }, []string{"x", "y"},
			func(sp protocol.ID) []Message { return []Message{m(sp, "y", "p")} }},
	}
	for _, c := range cases {
		for _, way := range []string{"relayed", "durable", "batch"} {
			t.Run(fmt.Sprint(c.name, "/", way), func(t *testing.T) {
				clock := int64(1)
				s := openSweepTest(t, &clock)
				sp := protocol.MessageID([]byte("space"))
				for _, x := range c.stored(sp) {
					if _, _, err := s.PutRelayed(t.Context(), x, Quota{}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := s.Heads(sp); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Count(sp); err != nil {
					t.Fatal(err)
				}
				attempts := 0
				s.afterDeleteRead = func([]protocol.ID) {
					attempts++
					if attempts > 1 {
						return
					}
					done := make(chan error, 1)
					go func() {
						var err error
						for _, x := range c.during(sp) {
							switch way {
							case "relayed":
								_, _, err = s.PutRelayed(t.Context(), x, Quota{})
							case "durable":
								_, _, err = s.PutWithin(t.Context(), x, Quota{})
							}
						}
						if way == "batch" {
							_, err = s.PutBatch(t.Context(), c.during(sp), Quota{})
						}
						done <- err
					}()
					if err := <-done; err != nil {
						t.Error(err)
					}
				}
				var ids []protocol.ID
				for _, d := range c.del {
					ids = append(ids, protocol.MessageID([]byte(d)))
				}
				if _, err := s.deleteMessages(ids); err != nil {
					t.Fatal(err)
				}
				t.Logf("%d attempts", attempts)
				checkAllKeys(t, s)
				truth := headsTruth(t, s)[sp]
				cached, _ := s.Heads(sp)
				disk, _ := s.readHeads(sp)
				if !slices.Equal(cached, truth) || !slices.Equal(disk, truth) {
					t.Errorf("heads: cached %v disk %v truth %v", notIn(cached, nil), notIn(disk, nil), notIn(truth, nil))
				}
			})
		}
	}
}
