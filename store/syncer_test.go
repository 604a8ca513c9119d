package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weftmesh/weft/protocol"
)

func syncTestMsg(space protocol.ID, name string) Message {
	return Message{ID: protocol.MessageID([]byte(name)), Space: space, Raw: []byte(name)}
}

// TestDurablePutSyncs checks that a durable Put waits for a sync and a
// relayed one does not, and that the periodic sync takes the relayed ones
// to disk.
func TestDurablePutSyncs(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp := protocol.MessageID([]byte("space"))
	before := s.syncer.syncs.Load()
	if _, _, err := s.PutWithin(t.Context(), syncTestMsg(sp, "local"), Quota{}); err != nil {
		t.Fatal(err)
	}
	if got := s.syncer.syncs.Load(); got != before+1 {
		t.Fatalf("durable Put: %d syncs, want %d", got-before, 1)
	}
	if _, added, err := s.PutRelayed(t.Context(), syncTestMsg(sp, "relayed"), Quota{}); err != nil || !added {
		t.Fatal(added, err)
	}
	if _, err := s.PutBatch(t.Context(), []Message{syncTestMsg(sp, "batched")}, Quota{}); err != nil {
		t.Fatal(err)
	}
	if got := s.syncer.syncs.Load(); got != before+1 {
		t.Fatalf("relayed Puts synced (%d syncs)", got-before-1)
	}
	if !s.syncer.dirty.Load() {
		t.Fatal("relayed Puts not marked for the next sync")
	}
	// Concurrent durable Puts all wait for a sync that started after
	// their commit (they share syncs as they come).
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if _, _, err := s.PutWithin(context.Background(), syncTestMsg(sp, fmt.Sprint("c", i)), Quota{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := s.syncer.syncs.Load(); got < before+2 || got > before+17 {
		t.Fatalf("16 durable Puts: %d syncs", got-before-1)
	}
	if s.syncer.dirty.Load() {
		t.Fatal("a sync for durable Puts left the relayed ones marked")
	}
}

// TestRelayedPutSyncedLater checks the periodic sync of relayed Puts.
func TestRelayedPutSyncedLater(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), SyncInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp := protocol.MessageID([]byte("space"))
	before := s.syncer.syncs.Load()
	if _, _, err := s.PutRelayed(t.Context(), syncTestMsg(sp, "relayed"), Quota{}); err != nil {
		t.Fatal(err)
	}
	waitPeriodicSync(t, s, before)
	// Nothing written since: the ticks sync nothing.
	n := s.syncer.syncs.Load()
	time.Sleep(50 * time.Millisecond)
	if got := s.syncer.syncs.Load(); got != n {
		t.Fatalf("%d syncs with nothing written", got-n)
	}
}

// TestPeriodicSyncOnDemand checks that the periodic sync wakes only for
// a write nobody waits for: an idle store, or one whose writes are all
// durable, runs no timer (an idle daemon's CPU), and a relayed write is
// still synced within the interval.
func TestPeriodicSyncOnDemand(t *testing.T) {
	const interval = 5 * time.Millisecond
	s, err := Open(Options{Dir: t.TempDir(), SyncInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp := protocol.MessageID([]byte("space"))
	quiet := func(what string) {
		t.Helper()
		w := s.syncer.wakes.Load()
		time.Sleep(40 * interval)
		// One stale kick may fire once more after a sync took its write.
		if got := s.syncer.wakes.Load() - w; got > 1 {
			t.Fatalf("%s: the periodic sync woke %d times in %s", what, got, 40*interval)
		}
	}
	quiet("idle")
	if _, _, err := s.PutWithin(t.Context(), syncTestMsg(sp, "durable"), Quota{}); err != nil {
		t.Fatal(err)
	}
	quiet("after a durable write")
	before := s.syncer.syncs.Load()
	if _, _, err := s.PutRelayed(t.Context(), syncTestMsg(sp, "relayed"), Quota{}); err != nil {
		t.Fatal(err)
	}
	waitPeriodicSync(t, s, before)
	if s.syncer.wakes.Load() == 0 {
		t.Fatal("relayed Put synced, but not by the periodic sync")
	}
	quiet("after the relayed write was synced")
}

// waitPeriodicSync waits until a sync has run since there were before
// and nothing is left marked for the periodic sync.
func waitPeriodicSync(t *testing.T, s *Store, before int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.syncer.syncs.Load() == before || s.syncer.dirty.Load() {
		if time.Now().After(deadline) {
			t.Fatal("relayed Put not synced by the periodic sync")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSyncRotated checks that the syncer fsyncs the rotated WAL and value
// log files (not the newest of their kind), once each, and forgets the
// ones deleted.
func TestSyncRotated(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"00001.mem", "00003.mem", "00002.mem", "000001.vlog", "000002.vlog", "MANIFEST", "000005.sst"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	y := newSyncer(dir, nil)
	if err := y.sync(); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"00001.mem": true, "00002.mem": true, "000001.vlog": true}
	if len(y.rotate) != len(want) {
		t.Fatalf("synced %v, want %v", y.rotate, want)
	}
	for name := range want {
		if !y.rotate[name] {
			t.Fatalf("synced %v, want %v", y.rotate, want)
		}
	}
	if err := os.Remove(filepath.Join(dir, "00001.mem")); err != nil {
		t.Fatal(err)
	}
	if err := y.sync(); err != nil {
		t.Fatal(err)
	}
	if y.rotate["00001.mem"] || len(y.rotate) != 2 {
		t.Fatalf("after a delete: %v", y.rotate)
	}
}

// TestSyncRotatedSkipsUnchangedDir checks that the listing is skipped
// while the directory's time is unchanged since a listing made well after
// it, and made again once it changes.
func TestSyncRotatedSkipsUnchangedDir(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"00001.mem", "00002.mem"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	y := newSyncer(dir, nil)
	if err := y.sync(); err != nil || !y.rotate["00001.mem"] {
		t.Fatalf("first listing: %v, synced %v", err, y.rotate)
	}
	// A rotation, with the directory's time as before: not listed.
	if err := os.WriteFile(filepath.Join(dir, "00003.mem"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	if err := y.sync(); err != nil || y.rotate["00002.mem"] {
		t.Fatalf("unchanged directory listed again: %v, synced %v", err, y.rotate)
	}
	// Its time changed: listed, the rotated file synced.
	now := time.Now()
	if err := os.Chtimes(dir, now, now); err != nil {
		t.Fatal(err)
	}
	if err := y.sync(); err != nil || !y.rotate["00002.mem"] {
		t.Fatalf("changed directory: %v, synced %v", err, y.rotate)
	}
}

// TestSyncVlogSkippedOnlyWhenUnchanged checks, on a real store, that a
// sync skips the newest value log only while nothing was written to it:
// a write through Badger's mapping (a message over the value threshold)
// sets the file's time, and the next sync then syncs it. It also checks
// that the syncer holds the newest WAL and value log, by name.
func TestSyncVlogSkippedOnlyWhenUnchanged(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	y := s.syncer
	sp := protocol.MessageID([]byte("space"))
	if _, _, err := s.PutWithin(t.Context(), syncTestMsg(sp, "small"), Quota{}); err != nil {
		t.Fatal(err)
	}
	y.mu.Lock()
	mem, vlog := y.mem.name, y.vlog.name
	y.mu.Unlock()
	if filepath.Ext(mem) != ".mem" || filepath.Ext(vlog) != ".vlog" {
		t.Fatalf("syncer holds %q and %q, want the newest WAL and value log", mem, vlog)
	}
	// As if the value log was last written long ago.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, vlog), old, old); err != nil {
		t.Fatal(err)
	}
	sync := func() {
		t.Helper()
		y.later()
		if err := y.wait(); err != nil {
			t.Fatal(err)
		}
	}
	sync() // syncs it: its time changed
	skips := y.vlogSkips.Load()
	sync()
	if got := y.vlogSkips.Load(); got != skips+1 {
		t.Fatalf("unchanged value log synced again (%d skips, want %d)", got, skips+1)
	}
	big := syncTestMsg(sp, "big")
	big.Raw = bytes.Repeat([]byte("x"), 64*kib) // over the value threshold
	if _, _, err := s.PutWithin(t.Context(), big, Quota{}); err != nil {
		t.Fatal(err)
	}
	if got := y.vlogSkips.Load(); got != skips+1 {
		t.Fatalf("value log written through its mapping, then not synced (%d skips, want %d)", got, skips+1)
	}
	fi, err := os.Stat(filepath.Join(dir, vlog))
	if err != nil || !fi.ModTime().After(old) {
		t.Fatalf("value log's time after a write: %v, %v", fi.ModTime(), err)
	}
}

// TestSyncWaitsForExpectedPut checks that a durable Put's sync waits for
// a Put announced (Expect) and not yet made, and that one sync then covers
// both; and that one announced Put not made delays it only up to the
// bound.
func TestSyncWaitsForExpectedPut(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.syncer.maxDefer = time.Hour // the test decides when the second Put comes
	sp := protocol.MessageID([]byte("space"))
	before := s.syncer.syncs.Load()

	arrived := s.Expect()
	first := make(chan error, 1)
	go func() {
		_, _, err := s.PutWithin(context.Background(), syncTestMsg(sp, "first"), Quota{})
		first <- err
	}()
	waitFor(t, func() bool { return s.syncer.deferred.Load() == 1 })
	if has, err := s.Has(syncTestMsg(sp, "first").ID); err != nil || !has {
		t.Fatal("the first Put is not committed while its sync waits", has, err)
	}
	select {
	case err := <-first:
		t.Fatalf("a Put returned before its sync (err %v)", err)
	default:
	}
	arrived()
	arrived() // again: nothing
	if _, _, err := s.PutWithin(t.Context(), syncTestMsg(sp, "second"), Quota{}); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := s.syncer.syncs.Load() - before; got != 1 {
		t.Fatalf("two Puts, the second expected: %d syncs, want 1", got)
	}
	if got := s.commits.ahead(); got != 0 {
		t.Fatalf("%d Puts still on their way", got)
	}

	// An announced Put that never comes: the sync waits for it only up
	// to maxDefer.
	s.syncer.mu.Lock()
	s.syncer.maxDefer = 20 * time.Millisecond
	s.syncer.mu.Unlock()
	never := s.Expect()
	defer never()
	if _, _, err := s.PutWithin(t.Context(), syncTestMsg(sp, "third"), Quota{}); err != nil {
		t.Fatal(err)
	}
	if got := s.syncer.syncs.Load() - before; got != 2 {
		t.Fatalf("after a third Put: %d syncs, want 2", got)
	}
	if got := s.syncer.deferred.Load(); got != 2 {
		t.Fatalf("%d deferred syncs, want 2", got)
	}
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPutWithinThenBeforeSync: PutWithinThen calls committed once its
// message is committed and readable, while the sync it waits for has not
// run (here held back by an announced Put), and returns only after that
// sync; a Put refused before its commit (over its quota) calls nothing.
func TestPutWithinThenBeforeSync(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.syncer.maxDefer = time.Hour // the sync waits until the test's second Put
	sp := protocol.MessageID([]byte("space"))
	first := syncTestMsg(sp, "first")
	before := s.syncer.syncs.Load()

	arrived := s.Expect()
	defer func() { // on a failure, so that Close does not wait for the held sync
		arrived()
		s.syncer.wake()
	}()
	committed := make(chan bool, 1)
	done := make(chan error, 1)
	go func() {
		_, _, err := s.PutWithinThen(context.Background(), first, Quota{}, func() {
			has, err := s.Has(first.ID)
			committed <- has && err == nil
		})
		done <- err
	}()
	select {
	case readable := <-committed:
		if !readable {
			t.Fatal("committed was called before the message could be read")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("committed was not called while the sync waited")
	}
	if got := s.syncer.syncs.Load() - before; got != 0 {
		t.Fatalf("committed was called after %d syncs, want it before the sync", got)
	}
	select {
	case err := <-done:
		t.Fatalf("PutWithinThen returned before its sync (err %v)", err)
	default:
	}
	arrived()
	if _, _, err := s.PutWithin(t.Context(), syncTestMsg(sp, "second"), Quota{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := s.syncer.syncs.Load() - before; got != 1 {
		t.Fatalf("%d syncs, want 1", got)
	}

	called := false
	_, _, err = s.PutWithinThen(t.Context(), syncTestMsg(sp, "over quota"), Quota{SpaceBytes: 1}, func() { called = true })
	if !errors.Is(err, ErrQuota) || called {
		t.Fatalf("a Put over its quota: err %v, committed called %v; want ErrQuota and no call", err, called)
	}
}
