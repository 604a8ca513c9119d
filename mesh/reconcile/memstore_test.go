package reconcile

import (
	"context"
	"slices"
	"sync"

	"github.com/weftmesh/weft/protocol"
)

// memStore is a plain in-memory Store and Sink for testing this package
// alone: a sorted slice, linear scans. The real one is store.Store.
type memStore struct {
	mu    sync.Mutex
	keys  map[protocol.ID][]protocol.SyncKey // per space, sorted
	wire  map[protocol.ID][]byte
	msgs  map[protocol.ID]*protocol.Message
	named map[protocol.ID]bool // named in some stored message's prev
	floor protocol.SyncKey
	puts  int // Deliver calls that stored something new
	has   int // Has calls
}

func newMemStore() *memStore {
	return &memStore{
		keys:  make(map[protocol.ID][]protocol.SyncKey),
		wire:  make(map[protocol.ID][]byte),
		msgs:  make(map[protocol.ID]*protocol.Message),
		named: make(map[protocol.ID]bool),
		floor: protocol.MinSyncKey,
	}
}

func (s *memStore) Deliver(_ context.Context, m *protocol.Message) error {
	s.add(m)
	return nil
}

func (s *memStore) add(m *protocol.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.wire[m.ID]; ok {
		return
	}
	s.puts++
	s.wire[m.ID] = m.Encode()
	s.msgs[m.ID] = m
	for _, p := range m.Prev {
		s.named[p] = true
	}
	k := protocol.KeyOf(m)
	ks := s.keys[m.Space]
	i, _ := slices.BinarySearchFunc(ks, k, protocol.SyncKey.Compare)
	s.keys[m.Space] = slices.Insert(ks, i, k)
}

// ids returns the space's message IDs in key order.
func (s *memStore) ids(space protocol.ID) []protocol.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return keyIDs(s.keys[space])
}

func (s *memStore) inRange(space protocol.ID, lo, hi protocol.SyncKey) []protocol.SyncKey {
	var out []protocol.SyncKey
	for _, k := range s.keys[space] {
		if !k.Less(lo) && k.Less(hi) {
			out = append(out, k)
		}
	}
	return out
}

func (s *memStore) Heads(space protocol.ID) ([]protocol.ID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []protocol.ID
	for _, k := range s.keys[space] {
		if !s.named[k.ID] {
			out = append(out, k.ID)
		}
	}
	return out, nil
}

func (s *memStore) Summary(space protocol.ID, lo, hi protocol.SyncKey) (int, protocol.Sum, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum protocol.Sum
	ks := s.inRange(space, lo, hi)
	for _, k := range ks {
		sum.Add(k.ID)
	}
	return len(ks), sum, nil
}

func (s *memStore) Keys(space protocol.ID, lo, hi protocol.SyncKey, limit int) ([]protocol.SyncKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.inRange(space, lo, hi)
	return ks[:min(limit, len(ks))], nil
}

func (s *memStore) Split(space protocol.ID, lo, hi protocol.SyncKey, parts int) ([]protocol.SyncKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.inRange(space, lo, hi)
	var out []protocol.SyncKey
	for i := 1; i < parts; i++ {
		j := i * len(ks) / parts
		if j > 0 && j < len(ks) && (len(out) == 0 || out[len(out)-1].Less(ks[j])) {
			out = append(out, ks[j])
		}
	}
	return out, nil
}

func (s *memStore) Wire(space, id protocol.ID) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.wire[id]
	if !ok || s.msgs[id].Space != space {
		return nil, false, nil
	}
	return w, true, nil
}

func (s *memStore) Has(id protocol.ID) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.has++
	_, ok := s.wire[id]
	return ok, nil
}

func (s *memStore) Floor(protocol.ID) (protocol.SyncKey, error) { return s.floor, nil }
