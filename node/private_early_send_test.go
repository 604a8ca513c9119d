package node

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
)

// TestPrivateSameSendTwice: two agents send the very same post (same
// content, parents and millisecond, hence the same ID). The first send's
// message is in the graph before it is stored (early); the second must
// not be answered until the message is stored (durability contract), and
// must be answered with its cursor.
func TestPrivateSameSendTwice(t *testing.T) {
	ctx := t.Context()
	a := privNode(t, "", nil, nil)
	sp, err := a.CreatePrivate(ctx, "dup", false)
	if err != nil {
		t.Fatal(err)
	}
	s := a.private.get(sp.ID)

	// Deterministic: the first send decided (m in the graph, not yet
	// stored), then the second send of the same message.
	d, err := a.draft(sp.ID, Post{Content: json.RawMessage(`{"text":"same"}`)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.signer.Sign(d, a.cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := a.decidePrivate(s, m, "api"); !ok || err != nil {
		t.Fatalf("decide: %v %v", ok, err)
	}
	e, _, err := a.ingestPrivate(ctx, s, m, "api")
	if err != nil {
		t.Fatalf("second send: %v", err)
	}
	if has, _ := a.store.Has(m.ID); !has {
		t.Errorf("second send of %s answered while the message is not stored", m.ID)
	}
	if e.Cursor == 0 {
		t.Errorf("second send of %s answered with no cursor", m.ID)
	}
	if !s.has(m.ID) {
		t.Errorf("%s stored but not in the graph", m.ID)
	}

	// Two agents send the same post at once.
	zero := 0
	for range 200 {
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			got   [2]Message
			errs  [2]error
		)
		for i := range 2 {
			wg.Go(func() {
				<-start
				got[i], errs[i] = a.Send(ctx, sp.ID, Post{Content: json.RawMessage(`{"text":"ok"}`)})
			})
		}
		close(start)
		wg.Wait()
		for i := range 2 {
			if errs[i] != nil {
				t.Fatalf("send: %v", errs[i])
			}
			if got[i].Cursor == 0 {
				zero++
			}
			if has, _ := a.store.Has(got[i].ID); !has || !s.has(got[i].ID) {
				t.Fatalf("sent %s: stored %v, in the graph %v", got[i].ID, has, s.has(got[i].ID))
			}
		}
	}
	if zero > 0 {
		t.Errorf("%d concurrent identical sends answered with no cursor (answered before stored)", zero)
	}
}

// TestPrivateFailedSendStoredKept: a send whose store call fails although
// the message is stored (the fsync failed after the commit, or a concurrent
// send of the same message stored it; here its context ends after another
// path stored it) keeps the message in the graph: it is a head of the
// store, and a graph without it made every later send name its parents
// and fail (CodeUnavailable) until a restart.
func TestPrivateFailedSendStoredKept(t *testing.T) {
	ctx := t.Context()
	a := privNode(t, "", nil, nil)
	sp, err := a.CreatePrivate(ctx, "kept", false)
	if err != nil {
		t.Fatal(err)
	}
	s := a.private.get(sp.ID)
	d, err := a.draft(sp.ID, Post{Content: json.RawMessage(`{"text":"stored"}`)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.signer.Sign(d, a.cfg.Limits)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.store.Put(ctx, storeMessage(m)); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := a.ingestPrivate(done, s, m, "api"); err == nil {
		t.Fatal("the send with its context ended succeeded: the test needs its store call to fail")
	}
	if !s.has(m.ID) {
		t.Errorf("%s is stored (a head of the store) but the graph forgot it", m.ID)
	}
	if _, err := a.Send(ctx, sp.ID, Post{Content: json.RawMessage(`{"text":"next"}`)}); err != nil {
		t.Errorf("the send after: %v", err)
	}
}
