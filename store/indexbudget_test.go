package store

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/weftmesh/weft/protocol"
)

// TestIndexReadBudget: queries read cold blocks of a space's range index
// back within a budget and then fail with ErrIndexBusy, as a peer's sync
// session that asks for ranges ending inside cold blocks would make them;
// updates read blocks back regardless, and the index stays whole.
func TestIndexReadBudget(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	s.maxHotBlocks, s.indexReads, s.indexReadBurst = 1, 0, 2
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp := protocol.SpaceID("budget")
	at := func(ms int64, text string) Message {
		content, _ := json.Marshal(map[string]string{"text": text})
		m, err := protocol.Sign(key, protocol.Draft{Space: sp, CreatedAt: time.UnixMilli(ms), Type: "text", Content: content}, protocol.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		return Message{ID: m.ID, Space: sp, Time: m.CreatedAt, Raw: m.Encode(), From: m.From}
	}
	t0 := time.Now().UnixMilli() - 10_000
	var ms []Message
	var keys []protocol.SyncKey
	for i := range 4 * maxBlockKeys {
		m := at(t0+int64(2*i), "m")
		ms = append(ms, m)
		keys = append(keys, m.SyncKey())
	}
	if _, err := s.PutBatch(t.Context(), ms, Quota{}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Count(sp); err != nil || n != len(ms) { // built: the first three blocks cold
		t.Fatalf("Count = %d, %v", n, err)
	}
	inside := func(b int) (protocol.SyncKey, protocol.SyncKey) {
		return keys[b*maxBlockKeys+100], keys[b*maxBlockKeys+101]
	}
	for b := range 2 {
		lo, hi := inside(b)
		if n, _, err := s.Summary(sp, lo, hi); err != nil || n != 1 {
			t.Fatalf("Summary inside block %d = %d, %v; want 1", b, n, err)
		}
	}
	lo, hi := inside(2)
	if _, _, err := s.Summary(sp, lo, hi); !errors.Is(err, ErrIndexBusy) {
		t.Fatalf("Summary past the budget: %v, want ErrIndexBusy", err)
	}
	// An update into a cold block is not budgeted.
	mid := at(keys[maxBlockKeys+300].Time+1, "late")
	if _, _, err := s.Put(t.Context(), mid); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, mid.SyncKey())
	slices.SortFunc(keys, protocol.SyncKey.Compare)
	s.indexMu.Lock()
	s.indexes[sp].reads.SetLimit(1e9)
	s.indexes[sp].reads.SetBurst(1e9)
	s.indexMu.Unlock()
	got, err := s.Keys(sp, protocol.MinSyncKey, protocol.MaxSyncKey, len(keys)+1)
	if err != nil || !slices.Equal(got, keys) {
		t.Fatalf("Keys = %d keys, %v; want the %d stored", len(got), err, len(keys))
	}
}
