package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftmesh/weft/store"
)

// TestRecords: records are kept per table across a reopen, listed in key
// order per table only, and bad tables, keys and sizes are refused.
func TestRecords(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir)
	for _, kv := range [][3]string{{"t1", "b", "2"}, {"t1", "a", "1"}, {"t1x", "a", "other"}, {"t1", "c", "3"}} {
		if err := s.PutRecord(kv[0], kv[1], []byte(kv[2])); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutRecord("t1", "c", []byte("3'")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDisk(t, dir)
	if v, err := s.Record("t1", "c"); err != nil || string(v) != "3'" {
		t.Fatalf("Record(t1, c) = %q, %v", v, err)
	}
	if _, err := s.Record("t1", "zz"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Record of a missing key: %v, want ErrNotFound", err)
	}
	var got []string
	if err := s.Records("t1", func(k string, v []byte) bool { got = append(got, k+"="+string(v)); return true }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "a=1,b=2,c=3'" {
		t.Fatalf("Records(t1) = %v", got)
	}
	got = nil
	s.Records("t1", func(k string, v []byte) bool { got = append(got, k); return false })
	if len(got) != 1 {
		t.Fatalf("Records did not stop when fn returned false: %v", got)
	}
	for _, bad := range []func() error{
		func() error { return s.PutRecord("", "k", nil) },
		func() error { return s.PutRecord("a\x00b", "k", nil) },
		func() error { return s.PutRecord("t", "", nil) },
		func() error { return s.PutRecord("t", "k", make([]byte, store.MaxRecordSize+1)) },
	} {
		if err := bad(); err == nil {
			t.Error("a bad record was stored")
		}
	}
}
