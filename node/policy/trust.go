package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/weftmesh/weft/internal/atomicfile"
)

// MaxTrustName bounds the name given to a trusted peer.
const MaxTrustName = 256

// Trusted is a peer on the trust list.
type Trusted struct {
	Peer  peer.ID   `json:"peer"`
	Name  string    `json:"name,omitempty"` // the user's name for it
	Added time.Time `json:"added"`
}

// trustFile is the JSON of the trust list on disk.
type trustFile struct {
	Version int       `json:"version"`
	Peers   []Trusted `json:"peers"`
}

// TrustList is the set of peers the user trusts, kept in a JSON file that
// is rewritten atomically on every change (a reader or a crash sees the old
// list or the new, never a part). Reads are served from memory. It is safe
// for concurrent use.
type TrustList struct {
	path string

	mu    sync.RWMutex
	peers map[peer.ID]Trusted
}

// LoadTrust reads the trust list kept at path; a missing file is an empty
// list (the file is created by the first change).
func LoadTrust(path string) (*TrustList, error) {
	tl := &TrustList{path: path, peers: make(map[peer.ID]Trusted)}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return tl, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trust list: %w", err)
	}
	var f trustFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("trust list %s: %w", path, err)
	}
	for _, t := range f.Peers {
		if err := t.Peer.Validate(); err != nil {
			return nil, fmt.Errorf("trust list %s: peer %q: %w", path, t.Peer, err)
		}
		tl.peers[t.Peer] = t
	}
	return tl, nil
}

// IsTrusted reports whether p is trusted (TrustList is a Relations).
func (tl *TrustList) IsTrusted(p peer.ID) bool {
	tl.mu.RLock()
	defer tl.mu.RUnlock()
	_, ok := tl.peers[p]
	return ok
}

// List returns the trusted peers, sorted by peer ID.
func (tl *TrustList) List() []Trusted {
	tl.mu.RLock()
	defer tl.mu.RUnlock()
	out := make([]Trusted, 0, len(tl.peers))
	for _, t := range tl.peers {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Trusted) int { return strings.Compare(string(a.Peer), string(b.Peer)) })
	return out
}

// Add trusts p under name (replacing the name of a peer already trusted)
// and reports whether p is new to the list. The list is on disk when it
// returns.
func (tl *TrustList) Add(p peer.ID, name string, now time.Time) (Trusted, bool, error) {
	if err := p.Validate(); err != nil {
		return Trusted{}, false, fmt.Errorf("peer %q: %w", p, err)
	}
	if len(name) > MaxTrustName {
		return Trusted{}, false, fmt.Errorf("name over %d bytes", MaxTrustName)
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	old, known := tl.peers[p]
	t := Trusted{Peer: p, Name: name, Added: now.UTC().Truncate(time.Millisecond)}
	if known {
		t.Added = old.Added
		if old == t {
			return t, false, nil
		}
	}
	next := maps.Clone(tl.peers)
	next[p] = t
	if err := tl.save(next); err != nil {
		return Trusted{}, false, err
	}
	tl.peers = next
	return t, !known, nil
}

// Remove takes p off the list and reports whether it was on it.
func (tl *TrustList) Remove(p peer.ID) (bool, error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if _, ok := tl.peers[p]; !ok {
		return false, nil
	}
	next := maps.Clone(tl.peers)
	delete(next, p)
	if err := tl.save(next); err != nil {
		return false, err
	}
	tl.peers = next
	return true, nil
}

// save writes peers to the file; the caller holds mu.
func (tl *TrustList) save(peers map[peer.ID]Trusted) error {
	f := trustFile{Version: 1, Peers: make([]Trusted, 0, len(peers))}
	for _, t := range peers {
		f.Peers = append(f.Peers, t)
	}
	slices.SortFunc(f.Peers, func(a, b Trusted) int { return strings.Compare(string(a.Peer), string(b.Peer)) })
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(tl.path, append(b, '\n')); err != nil {
		return fmt.Errorf("save trust list: %w", err)
	}
	return nil
}
