package store

import (
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/weftmesh/weft/protocol"
)

// usageVersion is the version of the usage counters; a store without it
// (made before they existed) is counted afresh when opened.
const usageVersion = 1

// migrateUsage makes sure the usage counters exist: in a store written
// before them, it rewrites every version 2 message record as version 4
// (adding its size and sender; its bytes stay under its data keys) and
// counts every message into the
// counters, then records usageVersion. It runs once, at Open, before
// anything else uses the store.
func (s *Store) migrateUsage() error {
	var have bool
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := get(txn, usageVersionKey())
		have = err == nil
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil || have {
		return err
	}
	var (
		delta    usageDelta
		rewrites = make(map[protocol.ID][]byte)
		migrated int
	)
	err = s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{prefixMessage}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(opts.Prefix); it.Next() {
			k := it.Item().Key()
			if len(k) != 1+protocol.IDSize {
				return fmt.Errorf("bad message key %x", k)
			}
			id := protocol.ID(k[1:])
			val, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			e, _, size, err := decodeRecordSize(id, val)
			if err != nil {
				return err
			}
			if size < 0 {
				if e.From, size, err = legacyUsage(txn, id, val); err != nil {
					return err
				}
				m := e.Message
				m.Raw = make([]byte, size) // only its length is encoded
				// Its bytes stay under its data keys.
				rewrites[id] = encodeRecord(m, uint64(e.Cursor), false)
			}
			delta.add(e.Space, e.From, size)
			migrated++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("count usage: %w", err)
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for id, rec := range rewrites {
		if err := wb.Set(messageKey(id), rec); err != nil {
			return fmt.Errorf("rewrite record %s: %w", id, err)
		}
	}
	since := s.nowMilli()
	for space, u := range delta.spaces {
		if err := wb.Set(usageKey(space), encodeUsage(u)); err != nil {
			return err
		}
	}
	for k, u := range delta.senders {
		if err := wb.Set(senderUsageKey(k.space, k.from), encodeSenderUsage(SenderUsage{Usage: u, Since: since})); err != nil {
			return err
		}
	}
	if err := wb.Set(usageVersionKey(), []byte{usageVersion}); err != nil {
		return err
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("write usage: %w", err)
	}
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("sync usage: %w", err)
	}
	if migrated > 0 {
		s.logger.Info("store: counted space usage", "messages", migrated, "records_rewritten", len(rewrites))
	}
	return nil
}

// legacyUsage returns the sender and size of a message whose record
// (version 2) holds neither, from its raw bytes: the sender is that of the
// weft message they encode ("" if they are not one).
func legacyUsage(txn *badger.Txn, id protocol.ID, val []byte) (string, int64, error) {
	e, err := readEntryRecord(txn, id, val)
	if err != nil {
		return "", 0, err
	}
	var from string
	if m, err := protocol.Decode(e.Raw, protocol.StoredLimits()); err == nil {
		from = m.From
	}
	return from, int64(len(e.Raw)), nil
}
