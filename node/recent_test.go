package node

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

func recentMsg(t *testing.T, key crypto.PrivKey, text string) *protocol.Message {
	t.Helper()
	content, _ := json.Marshal(map[string]string{"text": text})
	m, err := protocol.Sign(key, protocol.Draft{Space: protocol.SpaceID("recent"), CreatedAt: time.Now(), Type: "text", Content: content}, protocol.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func entryOf(m *protocol.Message, cursor store.Cursor) store.Entry {
	return store.Entry{Message: store.Message{ID: m.ID, Space: m.Space, Raw: m.Encode()}, Cursor: cursor}
}

// TestRecentCache: a read of a message the node received takes it decoded
// from the cache (the very message delivered, with the entry's cursor);
// others, those whose stored bytes differ, those too large to keep and
// those evicted are decoded from the entry, and read the same.
func TestRecentCache(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	var n Node
	kept := recentMsg(t, key, "kept")
	n.recent.put(kept)
	got, err := n.decode(entryOf(kept, 7))
	if err != nil {
		t.Fatal(err)
	}
	if got.Message != kept || got.Cursor != 7 {
		t.Errorf("read of a received message: %p cursor %v, want the delivered %p, cursor 7", got.Message, got.Cursor, kept)
	}

	other := recentMsg(t, key, "not received")
	got, err = n.decode(entryOf(other, 8))
	if err != nil || got.ID != other.ID || got.Message == other || string(got.Content) != string(other.Content) {
		t.Errorf("read of a message not received: %+v, %v", got.Message, err)
	}

	// Same ID, other bytes (cannot happen for a valid message: checked
	// anyway, at the cost of a comparison).
	e := entryOf(other, 9)
	e.ID = kept.ID
	if m, ok := n.recent.get(e); ok {
		t.Errorf("cache answered %v for an entry whose bytes differ", m.ID)
	}

	big := recentMsg(t, key, strings.Repeat("x", recentMaxWire))
	n.recent.put(big)
	if _, ok := n.recent.get(entryOf(big, 10)); ok {
		t.Error("a message over recentMaxWire was kept")
	}

	for i := range recentMessages {
		n.recent.put(recentMsg(t, key, fmt.Sprint(i)))
	}
	if _, ok := n.recent.get(entryOf(kept, 7)); ok {
		t.Errorf("the first message is still kept after %d more", recentMessages)
	}
	if len(n.recent.byID) != recentMessages || len(n.recent.ring) != recentMessages {
		t.Errorf("cache holds %d (ring %d), want %d", len(n.recent.byID), len(n.recent.ring), recentMessages)
	}
	got, err = n.decode(entryOf(kept, 7))
	if err != nil || got.ID != kept.ID || got.Message == kept {
		t.Errorf("read of an evicted message: %v, %v", got.Message, err)
	}
}
