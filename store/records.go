package store

import (
	"bytes"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// Records: small opaque values kept for a component of the daemon under a
// table name and a key, e.g. the A2A bridge's tasks (table "a2a:<agent>").
// The store does not read them.
//
//	a table 0x00 key → value
//
// A table name may not contain 0x00; keys and values are any bytes.

// prefixRecord is the one-byte prefix of the records table.
const prefixRecord byte = 'a'

// MaxRecordSize bounds one record's value.
const MaxRecordSize = 4 << 20

func recordPrefix(table string) []byte {
	k := make([]byte, 0, 2+len(table))
	k = append(k, prefixRecord)
	k = append(k, table...)
	return append(k, 0)
}

func recordKey(table, key string) []byte { return append(recordPrefix(table), key...) }

func checkTable(table, key string) error {
	switch {
	case table == "" || bytes.IndexByte([]byte(table), 0) >= 0:
		return fmt.Errorf("store: record table %q: empty or holds a NUL byte", table)
	case key == "":
		return errors.New("store: empty record key")
	}
	return nil
}

// PutRecord stores value under table and key, replacing what was there.
func (s *Store) PutRecord(table, key string, value []byte) error {
	if err := checkTable(table, key); err != nil {
		return err
	}
	if len(value) > MaxRecordSize {
		return fmt.Errorf("store: record %s/%s: %d bytes, over %d", table, key, len(value), MaxRecordSize)
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if err := s.update(func(txn *badger.Txn) error { return txn.Set(recordKey(table, key), value) }); err != nil {
		return fmt.Errorf("store: put record %s/%s: %w", table, key, err)
	}
	return nil
}

// Record returns the value under table and key, or ErrNotFound.
func (s *Store) Record(table, key string) ([]byte, error) {
	if err := checkTable(table, key); err != nil {
		return nil, err
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	var out []byte
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(recordKey(table, key))
		if err != nil {
			return err
		}
		out, err = it.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: record %s/%s: %w", table, key, err)
	}
	return out, nil
}

// Records calls fn with each key and value of table, in key order, until
// fn returns false. The value is valid only during the call.
func (s *Store) Records(table string, fn func(key string, value []byte) bool) error {
	if err := checkTable(table, "-"); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	prefix := recordPrefix(table)
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			key := string(it.Item().Key()[len(prefix):])
			more := true
			if err := it.Item().Value(func(v []byte) error { more = fn(key, v); return nil }); err != nil {
				return err
			}
			if !more {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: records %s: %w", table, err)
	}
	return nil
}
