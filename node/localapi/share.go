package localapi

import (
	"sync"

	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/store"
)

// The event streams of one space share their reads. Each commit to a
// space wakes every stream following it, and each read the same new
// messages from the store and encoded them: the same work once per
// stream. So while a space has more than one stream, the last read of one
// of them, encoded, is kept, and another stream reading from the same
// cursor before anything else is stored in the space writes those bytes
// instead of reading and encoding them again. "Before anything else is
// stored" is the backend's change signal: Changed returns the same
// channel until a commit closes it, so a stream holding the channel the
// kept read was made under finds the store as that read found it (or with
// more, which the next read gets once the closed channel wakes it). A
// lone stream keeps nothing.

// shares is an API's shared reads, by space. The zero value is ready; it
// is safe for concurrent use.
type shares struct {
	mu      sync.Mutex
	bySpace map[protocol.ID]*spaceShare
}

// spaceShare is the streams of one space and their last read.
type spaceShare struct {
	streams int
	last    *sharedRead // nil while only one stream follows the space
}

// sharedRead is one stream's read of a space, encoded.
type sharedRead struct {
	from    store.Cursor    // the cursor it read after
	changed <-chan struct{} // the space's change signal taken before it read
	events  []byte          // the messages read, as server-sent events; never written to
	next    store.Tail
	more    bool
}

// join counts a stream of space until the returned leave is called.
func (s *shares) join(space protocol.ID) (leave func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bySpace == nil {
		s.bySpace = make(map[protocol.ID]*spaceShare)
	}
	sp := s.bySpace[space]
	if sp == nil {
		sp = &spaceShare{}
		s.bySpace[space] = sp
	}
	sp.streams++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if sp.streams--; sp.streams == 0 {
			delete(s.bySpace, space)
		} else if sp.streams == 1 {
			sp.last = nil
		}
	}
}

// get returns the kept read of space from cursor from, if it was made
// under changed (nothing stored in space since), else nil.
func (s *shares) get(space protocol.ID, from store.Cursor, changed <-chan struct{}) *sharedRead {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.bySpace[space]; sp != nil && sp.last != nil && sp.last.from == from && sp.last.changed == changed {
		return sp.last
	}
	return nil
}

// keep keeps r as space's last read when other streams follow the space,
// and reports whether it did: r.events are then shared, and their
// writer must not write to them again.
func (s *shares) keep(space protocol.ID, r *sharedRead) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.bySpace[space]
	if sp == nil || sp.streams < 2 {
		return false
	}
	sp.last = r
	return true
}
