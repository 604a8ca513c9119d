package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/weftmesh/weft/mesh/reconcile"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
	"github.com/weftmesh/weft/store"
)

// MaxSpaceName bounds a space's name in bytes.
const MaxSpaceName = 128

// Space is a joined space as this node sees it.
type Space struct {
	store.Space
	Messages int   // messages held
	Bytes    int64 // bytes of the messages held (what the quota counts)
	Peers    int   // peers seen in the space's gossip topic
	// Keep is what the node keeps of the space: the space's own retention,
	// else the node's default (zero: everything).
	Keep store.Retention
	// Limit is what the node takes into the space: its own limits, else
	// the node's (a zero field: no bound).
	Limit store.SpaceLimits
	// Sync is what history sync does for the space; set by Status only
	// (nil elsewhere, and when sync is off).
	Sync *reconcile.SpaceState
	// Sealed: a private space whose content is encrypted end to end.
	Sealed bool
}

// CheckSpaceName reports whether name can name a space.
func CheckSpaceName(name string) error {
	switch {
	case name == "":
		return errorf(api.CodeBadRequest, "space name is empty")
	case len(name) > MaxSpaceName:
		return errorf(api.CodeBadRequest, "space name is over %d bytes", MaxSpaceName)
	case strings.ContainsAny(name, "/\\") || strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return errorf(api.CodeBadRequest, "space name must not contain '/', '\\' or control characters")
	}
	return nil
}

func (n *Node) describe(sp store.Space) Space {
	out := Space{Space: sp, Peers: len(n.mesh.SpacePeers(sp.ID)), Keep: sp.Retention}
	if c, err := n.store.Count(sp.ID); err == nil {
		out.Messages = c
	}
	if out.Keep == (store.Retention{}) {
		out.Keep = n.cfg.Retention
	}
	if u, err := n.store.Usage(sp.ID); err == nil {
		out.Bytes = u.Bytes
	}
	out.Limit = effectiveLimits(sp.Limits, n.cfg.SpaceLimits, n.cfg.Limits.MaxSize)
	out.Sealed = n.private.get(sp.ID).sealed()
	return out
}

// Spaces returns the joined spaces.
func (n *Node) Spaces() ([]Space, error) {
	spaces, err := n.store.Spaces()
	if err != nil {
		return nil, err
	}
	out := make([]Space, 0, len(spaces))
	for _, sp := range spaces {
		out = append(out, n.describe(sp))
	}
	return out, nil
}

// Space resolves ref, a joined space's name or ID; an unknown one is an
// *Error with api.CodeUnknownSpace.
func (n *Node) Space(ref string) (Space, error) {
	sp, err := n.resolve(ref)
	if err != nil {
		return Space{}, err
	}
	return n.describe(sp), nil
}

// SpaceID resolves ref as Space does, without counting what the space
// holds or who is in it: what a send or a read needs, on their hot path.
func (n *Node) SpaceID(ref string) (protocol.ID, error) {
	sp, err := n.resolve(ref)
	return sp.ID, err
}

func (n *Node) resolve(ref string) (store.Space, error) {
	if id, err := protocol.ParseID(ref); err == nil {
		if sp, err := n.store.Space(id); err == nil {
			return sp, nil
		}
	}
	sp, err := n.store.Space(protocol.SpaceID(ref))
	if errors.Is(err, store.ErrNotFound) {
		sp, err = n.privateByName(ref)
	}
	if err != nil {
		return store.Space{}, notFound(err, api.CodeUnknownSpace, fmt.Sprintf("unknown space %q: join it first", ref))
	}
	return sp, nil
}

// Join joins the open space called name; joining again changes nothing
// but the retention, when keep is not nil (nil keeps the space's, or the
// node's default for a new space). It reports whether the space is new.
func (n *Node) Join(name string, keep *store.Retention) (Space, bool, error) {
	if err := CheckSpaceName(name); err != nil {
		return Space{}, false, err
	}
	if keep != nil && (keep.MaxCount < 0 || keep.MaxAge < 0) {
		return Space{}, false, errorf(api.CodeBadRequest, "retention must not be negative")
	}
	sp, created, err := n.store.JoinSpace(store.Space{ID: protocol.SpaceID(name), Name: name, JoinedAt: time.Now().UTC()})
	if err != nil {
		return Space{}, false, err
	}
	if keep != nil && *keep != sp.Retention {
		if sp, err = n.store.SetRetention(sp.ID, *keep); err != nil {
			return Space{}, false, err
		}
	}
	n.limits.set(sp.ID, sp.Limits)
	n.cfg.Metrics.SpaceJoined(sp.ID.String(), sp.Name)
	if err := n.mesh.JoinSpace(sp.ID, spaceSink{n}); err != nil {
		return Space{}, false, err
	}
	if created {
		n.log.Info("joined space", "name", sp.Name, "space", sp.ID)
	}
	return n.describe(sp), created, nil
}

// SetSpaceLimits sets what the node takes into a joined space (by name or
// ID): its quotas and message size (zero fields: the node's defaults). A
// message size above the node's message limit is an error; lowering a
// quota below what the space holds takes nothing away, it only refuses
// what comes next.
func (n *Node) SetSpaceLimits(ref string, l store.SpaceLimits) (Space, error) {
	if l.MaxBytes < 0 || l.MaxSenderBytes < 0 || l.MaxMessageSize < 0 {
		return Space{}, errorf(api.CodeBadRequest, "space limits must not be negative")
	}
	if l.MaxMessageSize > n.cfg.Limits.MaxSize {
		return Space{}, errorf(api.CodeBadRequest, "max message size %d is above this node's limit of %d", l.MaxMessageSize, n.cfg.Limits.MaxSize)
	}
	cur, err := n.Space(ref)
	if err != nil {
		return Space{}, err
	}
	sp, err := n.store.SetLimits(cur.ID, l)
	if err != nil {
		return Space{}, err
	}
	n.limits.set(sp.ID, sp.Limits)
	return n.describe(sp), nil
}

// Leave leaves a joined space (by name or ID); its messages stay until
// swept. A member of a private space first tells the other members it
// leaves (leavePrivate).
func (n *Node) Leave(ctx context.Context, ref string) error {
	sp, err := n.Space(ref)
	if err != nil {
		return err
	}
	if err := n.leavePrivate(ctx, sp); err != nil {
		return err
	}
	if err := n.mesh.LeaveSpace(sp.ID); err != nil {
		return err
	}
	n.limits.drop(sp.ID)
	if err := n.store.LeaveSpace(sp.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	n.log.Info("left space", "name", sp.Name, "space", sp.ID)
	return nil
}

// Post is what an agent sends to a space: the daemon adds the sender, the
// time and the causal parents, and signs it.
type Post struct {
	Content json.RawMessage // a JSON object
	Type    string          // default "text"
	Refs    protocol.Refs
	TTL     time.Duration // 0: none
	Meta    map[string]string
}

// Send signs a message for a joined space, stores it durably and
// publishes it to the space's peers: an open space's once it is committed,
// while its sync runs; a private space's once it is on disk. It returns
// once the message is on disk and published. prev is set to some of the
// space's heads as this node sees them (see sendParents), a private
// space's by its membership rules (parentsFor). A publish failure is
// logged, not returned: the message is stored and peers repair gaps from
// the store.
func (n *Node) Send(ctx context.Context, space protocol.ID, p Post) (Message, error) {
	// Concurrent sends share one sync: one that syncs first waits a
	// moment for this one, being signed, to be stored (store.Expect).
	// Not a send to a private space: its draft and admission take the
	// space's lock, which a catch-up's batch holds while it is stored,
	// and every sync of the store would wait its full bound meanwhile.
	arrived := func() {}
	if n.private.get(space) == nil {
		arrived = n.store.Expect()
	}
	defer arrived()
	d, err := n.draft(space, p)
	if err != nil {
		return Message{}, err
	}
	if err := n.sealDraft(&d); err != nil {
		return Message{}, err
	}
	m, err := n.signer.Sign(d, n.cfg.Limits)
	if err != nil {
		return Message{}, err
	}
	if err := n.admit(m); err != nil {
		return Message{}, n.refusal(m, "api", err)
	}
	// Not announced while the space's pace may hold it back (seconds at
	// most): others' syncs would wait for it, each up to the store's bound.
	arrived()
	if err := n.pacer.wait(ctx, space, len(m.Wire())); err != nil {
		return Message{}, err
	}
	var span trace.Span = noop.Span{}
	if n.cfg.Tracer != nil { // the label costs a lookup and an encoding
		ctx, span = n.messageSpan(ctx, "send", n.spaceLabel(space), m)
	}
	// Published once committed, before the sync the answer waits for:
	// peers need not wait for this node's disk (a crash of the machine
	// before the sync loses the message here, not on the mesh, and sync
	// brings it back). Published by the commit's leader, in line: a
	// goroutine of its own, to publish while the sync ran, cost ~35 µs
	// of CPU per send in wake-ups (weft bench, 1 client), the fdatasync
	// it would overlap ~250 µs of wall time. Published before the
	// answer, so an agent's next send is published after this one.
	publish := func() {
		if err := n.mesh.Publish(ctx, m); err != nil {
			n.log.Warn("publish", "id", m.ID, "err", err)
		}
	}
	hooked := false
	e, _, err := n.ingestThen(ctx, m, "api", func() {
		hooked = true
		publish()
	})
	if err != nil {
		endSpan(span, err)
		return Message{}, err
	}
	if !hooked {
		publish()
	}
	endSpan(span, nil)
	n.cfg.Metrics.MessageSent(space.String())
	return n.openMessage(Message{Message: m, Cursor: e.Cursor}), nil
}

// checkContent checks the parts of a post every message has.
func checkContent(content json.RawMessage, ttl time.Duration, meta map[string]string) error {
	if len(content) == 0 || string(content) == "null" {
		return errorf(api.CodeInvalid, "content is missing: want a JSON object, e.g. {\"text\": \"hello\"}")
	}
	if ttl < 0 {
		return errorf(api.CodeInvalid, "ttl must not be negative")
	}
	if err := protocol.ValidateMeta(meta); err != nil {
		return wrap(api.CodeInvalid, err)
	}
	return nil
}

func (n *Node) draft(space protocol.ID, p Post) (protocol.Draft, error) {
	if err := checkContent(p.Content, p.TTL, p.Meta); err != nil {
		return protocol.Draft{}, err
	}
	d := protocol.Draft{
		Space:     space,
		CreatedAt: time.Now(),
		Type:      p.Type,
		TTL:       p.TTL,
		Refs:      p.Refs,
		Meta:      protocol.StripLocal(p.Meta), // local keys never leave this node
		Content:   p.Content,
	}
	if d.Type == "" {
		d.Type = "text"
	}
	var heads []protocol.ID
	var err error
	if s := n.private.get(space); s != nil {
		if heads, err = n.store.Heads(space); err == nil {
			heads = s.parentsFor(heads)
		}
	} else if heads, err = n.store.HeadsNewestFirst(space); err == nil {
		heads = pickParents(heads, sendParents)
	}
	if err != nil {
		return d, fmt.Errorf("heads: %w", err)
	}
	if len(heads) > n.cfg.Limits.MaxPrev {
		heads = heads[:n.cfg.Limits.MaxPrev]
	}
	d.Prev = slices.Clone(heads)
	return d, nil
}

// sendParents is how many of its open space's heads a send names as its
// parents (Prev), at most. Concurrent sends are siblings, each a head once
// stored, and a send that named every head named one parent per send in
// flight: 16 agents sending at once made each message name ~16 parents
// (~880 bytes of its ~1.3 KB), and every node that stored it wrote a
// child and a reference key for each (~40 keys per message instead of
// ~10), checked, synced and served the bytes. A send names the newest
// heads this node took in (sendNewest of them: its own last send, or a
// message just come, which a peer may have missed and would then ask
// for, gap repair following the parents a message names) and the rest at
// random among the others: concurrent sends pick different ones, so
// together they name about as many heads as there are, and the space
// still merges; a head not picked stays a head, to be named by a later
// send. Sync reconciles whole spaces whatever is named. Private spaces
// choose their own parents (parentsFor), by the membership rules.
const (
	sendParents = 4
	sendNewest  = 2
)

// pickParents returns n of heads, given newest first (all if there are no
// more): the sendNewest newest and the rest at random, sorted by ID bytes.
func pickParents(newestFirst []protocol.ID, n int) []protocol.ID {
	var out []protocol.ID
	if len(newestFirst) <= n {
		out = slices.Clone(newestFirst)
	} else {
		k := min(sendNewest, n)
		out = append(make([]protocol.ID, 0, n), newestFirst[:k]...)
		rest := newestFirst[k:]
		for _, i := range rand.Perm(len(rest))[:n-k] {
			out = append(out, rest[i])
		}
	}
	slices.SortFunc(out, func(a, b protocol.ID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// MaxAnswerBytes bounds the messages one answer of the daemon carries (as
// AnswerBytes counts them): a page of a space or of the inbox, a round of
// an event stream's replay, a thread. An answer stops before the message
// that would pass it, but always carries one, and a page's next cursor
// continues after the last message carried. 100 messages of 1 MiB read at
// once took the daemon's memory to 833 MB: messages, their JSON, and the
// buffer it was written through.
const MaxAnswerBytes = 4 << 20

// answerOverhead is what an answer adds around a message's signed body:
// its ID, cursor and signature as JSON, and field names.
const answerOverhead = 256

// AnswerBytes is what m weighs in an answer, as MaxAnswerBytes counts.
func (m Message) AnswerBytes() int { return len(m.Body) + answerOverhead }

// Read returns up to limit messages of a space (or the inbox) after a
// cursor, in this node's order, and the cursor to continue from; a
// sealed space's are decrypted (sealed.go).
func (n *Node) Read(space protocol.ID, after store.Cursor, limit int) ([]Message, store.Cursor, error) {
	ms, next, err := n.readStored(space, after, limit)
	return n.openAll(ms), next, err
}

// ReadWithin is Read that also stops before the message that would take
// the page past maxBytes as AnswerBytes counts (a sealed space's by its
// sealed bytes, which weigh more than what they open to), always
// returning one when there is one; cut reports that it stopped there, with
// more to read after next. It reads the store once.
func (n *Node) ReadWithin(space protocol.ID, after store.Cursor, limit, maxBytes int) (ms []Message, next store.Cursor, cut bool, err error) {
	entries, next, cut, err := n.store.ReadWithin(space, after, limit, maxBytes, answerOverhead)
	if err != nil {
		return nil, after, false, err
	}
	ms, err = n.decodeAll(entries)
	if err != nil {
		return nil, after, false, err
	}
	return n.openAll(ms), next, cut, nil
}

// ReadTail is ReadWithin for a follower, from where its last read left it
// (store.Tail): the store reads only what was committed since, when it
// can.
func (n *Node) ReadTail(space protocol.ID, t store.Tail, limit, maxBytes int) (ms []Message, next store.Tail, cut bool, err error) {
	entries, next, cut, err := n.store.ReadTail(space, t, limit, maxBytes, answerOverhead)
	if err != nil {
		return nil, t, false, err
	}
	ms, err = n.decodeAll(entries)
	if err != nil {
		return nil, t, false, err
	}
	return n.openAll(ms), next, cut, nil
}

// readStored is Read of the messages as stored (a sealed space's sealed).
func (n *Node) readStored(space protocol.ID, after store.Cursor, limit int) ([]Message, store.Cursor, error) {
	entries, next, err := n.store.Read(space, after, limit)
	if err != nil {
		return nil, after, err
	}
	out, err := n.decodeAll(entries)
	if err != nil {
		return nil, after, err
	}
	return out, next, nil
}

// decodeAll decodes stored entries for a page.
func (n *Node) decodeAll(entries []store.Entry) ([]Message, error) {
	out := make([]Message, 0, len(entries))
	for _, e := range entries {
		m, err := n.decode(e)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// readStored reads back a stored entry for a page: its bytes were checked
// when they were stored (Validate or Sign), so only their fields are read
// (protocol.DecodeStored), at less than half decodeStored's cost.
func readStored(e store.Entry) (Message, error) {
	m, err := protocol.DecodeStored(e.Raw)
	if err != nil {
		return Message{}, fmt.Errorf("stored message %s: %w", e.ID, err)
	}
	return Message{Message: m, Cursor: e.Cursor}, nil
}

// End returns the cursor of the current end of a space (or the inbox).
func (n *Node) End(space protocol.ID) (store.Cursor, error) { return n.store.End(space) }

// Changed returns a channel closed when the space (or the inbox) next
// gets a message.
func (n *Node) Changed(space protocol.ID) <-chan struct{} { return n.store.Changed(space) }

// Inbox returns the ID of this node's inbox, the space that holds the
// direct messages it receives.
func (n *Node) Inbox() protocol.ID { return protocol.InboxSpace(n.mesh.ID()) }

// Get returns a stored message; one this node does not hold is an *Error
// with api.CodeNotFound.
func (n *Node) Get(id protocol.ID) (Message, error) {
	e, err := n.store.Get(id)
	if err != nil {
		return Message{}, notFound(err, api.CodeNotFound, "no message "+id.String())
	}
	m, err := decodeStored(e)
	if err != nil {
		return m, err
	}
	return n.openMessage(m), nil
}
