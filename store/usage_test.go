package store

import (
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/weftmesh/weft/protocol"
)

func openAt(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, SweepInterval: -1, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func signed(t *testing.T, key crypto.PrivKey, space protocol.ID, text string) Message {
	t.Helper()
	content, _ := json.Marshal(map[string]string{"text": text})
	m, err := protocol.Sign(key, protocol.Draft{Space: space, CreatedAt: time.Now(), Type: "text", Content: content}, protocol.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return Message{ID: m.ID, Space: space, Time: m.CreatedAt, Raw: m.Encode(), From: m.From}
}

// TestUsageSurvivesRestart: the counters are on disk, written with the
// messages, so a reopened store knows them without counting.
func TestUsageSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	sp := protocol.SpaceID("restart")
	var want Usage
	for i, from := range []string{"a", "b", "a"} {
		m := Message{ID: protocol.MessageID([]byte{byte(i)}), Space: sp, From: from, Raw: make([]byte, 100*(i+1))}
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		want.Bytes += int64(len(m.Raw))
		want.Count++
	}
	before, _ := s.SenderUsage(sp, "a")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir)
	defer s.Close()
	if got, err := s.Usage(sp); err != nil || got != want {
		t.Errorf("Usage after reopen = %+v, %v; want %+v", got, err, want)
	}
	if got, err := s.SenderUsage(sp, "a"); err != nil || got != before || got.Bytes != 400 {
		t.Errorf("SenderUsage(a) after reopen = %+v, %v; want %+v", got, err, before)
	}
}

// TestUsageMigration: a store written before the counters (version 2
// records, no counters) is counted when opened, its senders read from the
// messages' bytes, and its records rewritten so that deletes count too.
func TestUsageMigration(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir)
	sp := protocol.SpaceID("old")
	key, _, _ := crypto.GenerateEd25519Key(nil)
	var msgs []Message
	for _, text := range []string{"one", "two", "three"} {
		m := signed(t, key, sp, text)
		if _, _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	junk := Message{ID: protocol.MessageID([]byte("junk")), Space: sp, Raw: []byte("not a weft message")}
	if _, _, err := s.Put(t.Context(), junk); err != nil {
		t.Fatal(err)
	}
	want, _ := s.Usage(sp)
	makeV2Store(t, s, append(msgs, junk), usageKey(sp), senderUsageKey(sp, msgs[0].From), senderUsageKey(sp, ""))

	s = openAt(t, dir)
	defer s.Close()
	if got, err := s.Usage(sp); err != nil || got != want {
		t.Errorf("Usage after migration = %+v, %v; want %+v", got, err, want)
	}
	var senderBytes int64
	for _, m := range msgs {
		senderBytes += int64(len(m.Raw))
	}
	if got, _ := s.SenderUsage(sp, msgs[0].From); got.Bytes != senderBytes || got.Count != 3 {
		t.Errorf("the sender's usage after migration = %+v, want %d bytes in 3", got, senderBytes)
	}
	if got, _ := s.SenderUsage(sp, ""); got.Bytes != int64(len(junk.Raw)) {
		t.Errorf("the junk's usage (no sender) = %+v", got)
	}
	_ = s.db.View(func(txn *badger.Txn) error {
		val, err := get(txn, messageKey(msgs[0].ID))
		if err != nil || val[0] != recordVersion {
			t.Errorf("record after migration: version %v, %v; want %d", val[:1], err, recordVersion)
		}
		return nil
	})
	// Deleting counts now.
	if _, err := s.deleteMessages([]protocol.ID{msgs[0].ID, junk.ID}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SenderUsage(sp, msgs[0].From); got.Count != 2 || got.Bytes != senderBytes-int64(len(msgs[0].Raw)) {
		t.Errorf("the sender's usage after a delete = %+v", got)
	}
	if got, _ := s.Usage(sp); got.Count != 2 {
		t.Errorf("Usage after deletes = %+v, want 2 messages", got)
	}
}

// encodeRecordV2 is the record format before usage accounting.
func encodeRecordV2(m Message, seq uint64, chunks int) []byte {
	b := []byte{recordVersionV2}
	b = binary.BigEndian.AppendUint64(b, seq)
	b = append(b, m.Space[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(m.Time))
	b = binary.BigEndian.AppendUint64(b, uint64(m.Expires))
	b = appendIDs(b, m.Prev)
	b = appendIDs(b, m.ReplyTo)
	return binary.AppendUvarint(b, uint64(chunks))
}

// makeV2Store makes s a store from before the usage counters: ms's
// records of version 2 (their bytes under data keys), the counters keys
// and the counters' version gone. It closes s.
func makeV2Store(t *testing.T, s *Store, ms []Message, counters ...[]byte) {
	t.Helper()
	err := s.db.Update(func(txn *badger.Txn) error {
		for _, m := range ms {
			val, err := get(txn, messageKey(m.ID))
			if err != nil {
				return err
			}
			if err := setRecordV2(txn, m.ID, val); err != nil {
				return err
			}
		}
		for _, k := range append(counters, usageVersionKey()) {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// setRecordV2 rewrites message id's record val as a version 2 record, as
// an old store held it: its raw bytes under the data keys.
func setRecordV2(txn *badger.Txn, id protocol.ID, val []byte) error {
	e, n, err := decodeRecord(id, val)
	if err != nil {
		return err
	}
	if n == 0 && len(e.Raw) > 0 { // held in the record (version 4)
		for i, chunk := range chunks(e.Raw) {
			if err := txn.Set(dataKey(id, i), chunk); err != nil {
				return err
			}
			n = i + 1
		}
	}
	return txn.Set(messageKey(id), encodeRecordV2(e.Message, uint64(e.Cursor), n))
}

// TestDeleteV2Record: a version 2 record met by a delete (should one be
// left) is counted from its raw bytes.
func TestDeleteV2Record(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	sp := protocol.SpaceID("v2")
	key, _, _ := crypto.GenerateEd25519Key(nil)
	m := signed(t, key, sp, "hi")
	if _, _, err := s.Put(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	_ = s.db.Update(func(txn *badger.Txn) error {
		val, _ := get(txn, messageKey(m.ID))
		return setRecordV2(txn, m.ID, val)
	})
	if _, err := s.deleteMessages([]protocol.ID{m.ID}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Usage(sp); got != (Usage{}) {
		t.Errorf("Usage after deleting the only message = %+v", got)
	}
	if got, _ := s.SenderUsage(sp, m.From); got != (SenderUsage{}) {
		t.Errorf("SenderUsage after deleting the only message = %+v", got)
	}
}
