package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weftmesh/weft/protocol"
)

// Tuning of the exchange.
const (
	// branching is how many sub-ranges a differing range is split into.
	branching = 16
	// idListMax: a differing range holding at most this many of our
	// messages is answered with their IDs instead of being split.
	idListMax = 32
	// subListMax: a sub-range of a split holding at most this many is sent
	// as IDs at once rather than as a fingerprint.
	subListMax = 2
	// frameMessageBytes is the most message bytes an exchange may carry
	// (plus one message), which decoding accepts (see maxFrame).
	frameMessageBytes = 4 << 20
	// sendMessageBytes is the budget of message bytes in the exchanges
	// this node sends (at least one message is always sent). It is a
	// quarter of what is accepted: a joiner holds about three exchanges
	// at once (one read, one verified, one stored) and their messages
	// decoded; at 4 MiB those ~35 MB brought its Go heap near its soft
	// limit for a large catch-up, where the garbage collector ran about
	// as long as Badger wrote. Round trips are cheap next to that.
	sendMessageBytes = 1 << 20
	// frameWants bounds the IDs asked for in one exchange.
	frameWants = 8192
	// maxOutstanding bounds the IDs asked for and not yet received. The
	// ranges whose IDs find no room are put off (see session.postponed)
	// and offered to the peer again once half of that room is free.
	maxOutstanding = 1 << 16
	// maxGot bounds the IDs a session remembers having stored (see
	// session.got); beyond it, the store is asked.
	maxGot = 1 << 18
	// frameRangeBytes is the budget of range bytes in one exchange; the
	// ranges beyond it are answered next turn (see process).
	frameRangeBytes = 1 << 20
	// idListBulk: a differing range the peer holds nothing of is answered
	// with up to this many of our IDs at once (at most 128 KiB) rather
	// than split again.
	idListBulk = 4096
	// pipelineDepth is how many of the peer's exchanges may be validated
	// and stored while this side answers the last one. With 1, each
	// answer waited for the exchange before the last to be stored, so the
	// peer read the next messages only while the last ones were stored:
	// a joiner's store sat idle whenever that read took longer than the
	// store. With 2 the peer reads one exchange further ahead (a joiner
	// holds one more exchange of messages, up to sendMessageBytes).
	pipelineDepth = 2
	// deliverWorkers is how many messages are handed at once to a Sink
	// that takes them one by one (not a BatchSink), so that durable
	// stores can share fsyncs.
	deliverWorkers = 16
)

// ErrRefused wraps a peer's protocol violation or invalid message: the
// session is aborted and the peer is refused for a while.
var ErrRefused = errors.New("peer refused")

// session is one side of a sync session: the state both sides keep, and
// the processing of one exchange into the next.
type session struct {
	space protocol.ID
	floor protocol.SyncKey
	st    Store
	sink  Sink
	cfg   *config

	wanted  map[protocol.ID]struct{} // asked for (or about to be), not yet received
	toWant  []protocol.ID            // not yet asked for
	toSend  []protocol.ID            // the peer asked for these; sent over the next exchanges
	queued  map[protocol.ID]struct{} // in toSend or already sent, so nothing is sent twice
	missing []protocol.ID            // the peer asked for these and we have none (or no room left)
	sent    int64                    // message bytes sent to the peer in this session
	left    *atomic.Int64            // told len(wanted) (see report); nil: nobody

	// inflight are the peer's last exchanges' messages being validated
	// and stored while the session answers (see process), oldest first;
	// at most pipelineDepth.
	inflight []*delivery
	// got holds the messages this session stored (up to maxGot), so that
	// asking for their children's parents needs no store lookup.
	got map[protocol.ID]struct{}

	// postponed spans the ranges answered as settled although the peer
	// holds messages there that were not asked for, for want of room
	// (outstanding): offered to the peer again, as one range with our
	// fingerprint, once there is room (see reopen); if set.
	postponed struct {
		lo, hi protocol.SyncKey
		set    bool
	}
	// full counts the IDs wantIn left out for want of room.
	full int
	// later is how many messages the peer holds in the postponed span
	// that were not asked for: the IDs left out of its lists, and its
	// count of ranges put off whole (some may be held here already).
	// Counted in what report tells; zero again once the span is offered
	// again (its messages are then listed, and asked for or put off anew).
	// At most maxLater: a peer's counts are its word.
	later int
	// reopens counts the times postponed was offered again; reopenedAt is
	// fetched then (each offer must follow some progress).
	reopens, reopenedAt int
	// fetched counts the messages received that were asked for: a peer
	// sending again what this side holds (which stats.Received counts)
	// makes no progress.
	fetched int

	stats Stats
}

func newSession(space protocol.ID, floor protocol.SyncKey, st Store, sink Sink, cfg *config) *session {
	return &session{
		space:  space,
		floor:  floor,
		st:     st,
		sink:   sink,
		cfg:    cfg,
		wanted: make(map[protocol.ID]struct{}),
		queued: make(map[protocol.ID]struct{}),
	}
}

// summary returns our count and fingerprint of [lo, hi).
func (s *session) summary(lo, hi protocol.SyncKey) (int, protocol.Fingerprint, error) {
	n, sum, err := s.st.Summary(s.space, lo, hi)
	if err != nil {
		return 0, protocol.Fingerprint{}, fmt.Errorf("summary: %w", err)
	}
	return n, sum.Fingerprint(n), nil
}

// want asks for id unless it is stored or already asked for.
func (s *session) want(id protocol.ID) error {
	return s.wantIn(id, true)
}

// wantIn is want; with check false the store is not asked whether it
// holds id: the caller knows that it holds nothing where id's key lies
// (a range we hold nothing of). Should it hold id all the same (stored
// since, or not indexed), the peer sends it and the Sink, which is
// idempotent, does not store it twice.
func (s *session) wantIn(id protocol.ID, check bool) error {
	if _, ok := s.wanted[id]; ok {
		return nil
	}
	if _, ok := s.got[id]; ok {
		return nil
	}
	if check {
		has, err := s.st.Has(id)
		if err != nil || has {
			return err
		}
	}
	if len(s.wanted) >= s.cfg.outstanding {
		s.full++ // its range is put off (see reconcile)
		return nil
	}
	s.wanted[id] = struct{}{}
	s.toWant = append(s.toWant, id)
	return nil
}

// maxLater bounds session.later.
const maxLater = 1 << 24

// report tells left how many messages the session wants and has not
// received yet, with those it put off for want of room (see later).
func (s *session) report() {
	if s.left != nil {
		s.left.Store(int64(len(s.wanted) + s.later))
	}
}

// send queues id to be pushed to the peer, once per session.
func (s *session) send(id protocol.ID) {
	if _, ok := s.queued[id]; ok {
		return
	}
	s.queued[id] = struct{}{}
	s.toSend = append(s.toSend, id)
}

// wantHeads asks for the peer's heads we lack.
func (s *session) wantHeads(heads []protocol.ID) error {
	defer s.report()
	for _, h := range heads {
		if err := s.want(h); err != nil {
			return err
		}
	}
	return nil
}

// opening is the responder's first exchange: one range over everything,
// with our fingerprint.
func (s *session) opening() (*exchange, error) {
	n, fp, err := s.summary(s.floor, protocol.MaxSyncKey)
	if err != nil {
		return nil, err
	}
	x := &exchange{ranges: []rng{{upper: protocol.MaxSyncKey, mode: modeFingerprint, count: n, fp: fp}}}
	return x, s.fill(x)
}

// process handles the peer's exchange in and returns ours.
//
// The messages of in are validated and stored in the background while
// the rest of in is answered (pipelining: the peer reads and sends the
// next messages asked for while this side verifies and stores the last
// ones); a later process, or the end of the session (settle), waits for
// them. The parents they name and lack are asked for once they are
// stored, so an answer that would otherwise be empty waits for them.
//
// The messages of in are validated while the last exchanges' are still
// being stored (they are stored after them, so parents still come first);
// process answers once all but the last pipelineDepth exchanges (in
// included) are stored, or all of them when in brought no messages.
func (s *session) process(ctx context.Context, in *exchange) (*exchange, error) {
	if d := s.startReceive(ctx, in.msgs, s.last()); d != nil {
		s.inflight = append(s.inflight, d)
	}
	for len(s.inflight) > pipelineDepth || len(s.inflight) > 0 && len(in.msgs) == 0 {
		// The oldest is applied: beyond the depth, or when the peer sent
		// no messages (the pipeline drains as the session ends).
		if err := s.applyOldest(); err != nil {
			return nil, err
		}
	}
	for _, id := range in.missing {
		delete(s.wanted, id)
	}
	s.stats.Missing += len(in.missing)
	for _, id := range in.wants {
		if _, ok := s.queued[id]; ok {
			continue
		}
		// Whether we hold it is found when it is read to be sent (fill):
		// reading it here as well read every message twice.
		s.send(id)
	}
	out := &exchange{}
	lower := s.floor
	for i, r := range in.ranges {
		if out.rangeBytes > s.cfg.rangeBudget {
			// Out of room: what is left of the peer's ranges is answered
			// with our fingerprint of it, which the peer splits again.
			last := in.ranges[len(in.ranges)-1].upper
			n, fp, err := s.summary(lower, last)
			if err != nil {
				return nil, err
			}
			out.addRange(rng{upper: last, mode: modeFingerprint, count: n, fp: fp})
			s.stats.Deferred += len(in.ranges) - i
			break
		}
		if err := s.reconcile(out, lower, r); err != nil {
			return nil, err
		}
		lower = r.upper
	}
	onlySkips := len(out.ranges) == 0 || len(out.ranges) == 1 && out.ranges[0].mode == modeSkip
	// Asked for and not in an exchange in flight (roughly: their messages
	// are still in wanted).
	owed := len(s.wanted)
	for _, d := range s.inflight {
		owed -= d.count
	}
	quiet := onlySkips && len(s.toWant) == 0 && len(s.toSend) == 0 && len(s.missing) == 0 && owed <= 0
	if len(s.inflight) > 0 && quiet {
		// Nothing else to say, and the peer owes us nothing more (if it
		// did, our empty answer would get more messages or missing IDs,
		// not the end): what these messages lack may be worth asking.
		// Before reopen: it frees their room, and counts them received.
		if err := s.settle(); err != nil {
			return nil, err
		}
		quiet = len(s.toWant) == 0
	}
	if onlySkips {
		// quiet: our answer would be empty and so would the peer's, which
		// ends the session (converse) before an empty in reaches reopen.
		if err := s.reopen(out, in, quiet); err != nil {
			return nil, err
		}
	}
	if err := s.fill(out); err != nil {
		return nil, err
	}
	return out, nil
}

// reconcile answers the peer's range [lo, r.upper), appending our ranges
// over the same span to out.
func (s *session) reconcile(out *exchange, lo protocol.SyncKey, r rng) error {
	hi := r.upper
	skip := func() { out.addRange(rng{upper: hi, mode: modeSkip}) }
	switch r.mode {
	case modeSkip:
		skip()
		return nil
	case modeIDList:
		// Ask for theirs we lack. We never push ours: a peer is sent only
		// what it asks for, so that a few bytes cannot make a node send a
		// whole space. If we hold some they did not list (and have not
		// asked for), we answer with our own list of the range, or split
		// it if it is large; they ask for what they lack, and their answer
		// settles it.
		n, _, err := s.summary(lo, hi)
		if err != nil {
			return err
		}
		// Holding nothing in the range (a late joiner, all of it), we
		// lack every ID listed: no store lookup for each.
		theirs := make(map[protocol.ID]struct{}, len(r.ids))
		full := s.full
		for _, id := range r.ids {
			theirs[id] = struct{}{}
			if err := s.wantIn(id, n > 0); err != nil {
				return err
			}
		}
		if s.full > full {
			// Some not asked for, for want of room: settled for now, and
			// offered again once there is room.
			s.later += s.full - full
			s.postpone(lo, hi)
			skip()
			return nil
		}
		if n <= len(r.ids)+idListBulk { // else there is plenty they lack
			if extra, err := s.extra(lo, hi, n, theirs); err != nil || !extra {
				skip()
				return err
			}
		}
		return s.answerRange(out, lo, hi, n, len(r.ids) == 0)
	}
	// modeFingerprint
	n, fp, err := s.summary(lo, hi)
	if err != nil {
		return err
	}
	switch {
	case n == r.count && fp == r.fp:
		skip()
	case n == 0 && len(s.wanted) >= s.cfg.outstanding:
		// No room to ask for their IDs: put off rather than have them
		// listed now and left out.
		s.later = min(s.later+r.count, maxLater) // the peer's word
		s.postpone(lo, hi)
		skip()
	case n == 0:
		// We have nothing here: an empty list says so, and they answer
		// with their IDs.
		out.addRange(rng{upper: hi, mode: modeIDList})
	default:
		return s.answerRange(out, lo, hi, n, r.count == 0)
	}
	return nil
}

// postpone adds [lo, hi) to the span put off for want of room.
func (s *session) postpone(lo, hi protocol.SyncKey) {
	if !s.postponed.set {
		s.postponed.lo, s.postponed.hi, s.postponed.set = lo, hi, true
	} else {
		if lo.Less(s.postponed.lo) {
			s.postponed.lo = lo
		}
		if s.postponed.hi.Less(hi) {
			s.postponed.hi = hi
		}
	}
	s.stats.Postponed++
}

// reopen offers the postponed span to the peer again, as out's one range
// (our count and fingerprint of it, skips around), when out has nothing
// else to say of ranges, half the room for IDs is free (or the peer has
// nothing more to send, or quiet: our answer would otherwise be empty,
// which would end the session) and a message asked for has been received
// since the last offer (so that a peer which lists messages and never
// sends them, or sends others instead, cannot keep the session going).
func (s *session) reopen(out, in *exchange, quiet bool) error {
	if !s.postponed.set {
		return nil
	}
	if len(s.wanted) > s.cfg.outstanding/2 && !in.empty() && !quiet {
		return nil
	}
	if s.reopens > 0 && s.fetched <= s.reopenedAt {
		return nil
	}
	lo, hi := s.postponed.lo, s.postponed.hi
	n, fp, err := s.summary(lo, hi)
	if err != nil {
		return err
	}
	s.postponed.set = false
	s.later = 0
	s.reopens++
	s.reopenedAt = s.fetched
	out.ranges, out.rangeBytes = nil, 0
	if s.floor.Less(lo) {
		out.addRange(rng{upper: lo, mode: modeSkip})
	}
	out.addRange(rng{upper: hi, mode: modeFingerprint, count: n, fp: fp})
	if hi != protocol.MaxSyncKey {
		out.addRange(rng{upper: protocol.MaxSyncKey, mode: modeSkip})
	}
	return nil
}

// extra reports whether we hold, in [lo, hi), a message that is neither
// in theirs nor already asked for by the peer. n is our count there.
func (s *session) extra(lo, hi protocol.SyncKey, n int, theirs map[protocol.ID]struct{}) (bool, error) {
	keys, err := s.st.Keys(s.space, lo, hi, max(n, 1))
	if err != nil {
		return false, fmt.Errorf("keys: %w", err)
	}
	for _, k := range keys {
		_, has := theirs[k.ID]
		_, sent := s.queued[k.ID]
		if !has && !sent {
			return true, nil
		}
	}
	return false, nil
}

// answerRange answers a differing range [lo, hi) where we hold n messages:
// with their IDs if few (or, when the peer holds none there, up to
// idListBulk of them), else split.
func (s *session) answerRange(out *exchange, lo, hi protocol.SyncKey, n int, theyHaveNone bool) error {
	switch {
	case n <= idListMax, theyHaveNone && n <= idListBulk:
		keys, err := s.st.Keys(s.space, lo, hi, max(n, 1))
		if err != nil {
			return fmt.Errorf("keys: %w", err)
		}
		out.addRange(rng{upper: hi, mode: modeIDList, ids: keyIDs(keys)})
		return nil
	}
	return s.split(out, lo, hi)
}

// split answers a large differing range with sub-ranges: fingerprints, or
// ID lists for the smallest.
func (s *session) split(out *exchange, lo, hi protocol.SyncKey) error {
	bounds, err := s.st.Split(s.space, lo, hi, branching)
	if err != nil {
		return fmt.Errorf("split: %w", err)
	}
	bounds = append(bounds, hi)
	for _, b := range bounds {
		if !lo.Less(b) || hi.Less(b) {
			return fmt.Errorf("split: bound outside (%v, %v]", lo, hi)
		}
		n, fp, err := s.summary(lo, b)
		if err != nil {
			return err
		}
		if n <= subListMax {
			keys, err := s.st.Keys(s.space, lo, b, max(n, 1))
			if err != nil {
				return fmt.Errorf("keys: %w", err)
			}
			out.addRange(rng{upper: b, mode: modeIDList, ids: keyIDs(keys)})
		} else {
			out.addRange(rng{upper: b, mode: modeFingerprint, count: n, fp: fp})
		}
		lo = b
	}
	return nil
}

// addRange appends r, merging adjacent skips.
func (x *exchange) addRange(r rng) {
	if r.mode == modeSkip && len(x.ranges) > 0 && x.ranges[len(x.ranges)-1].mode == modeSkip {
		x.ranges[len(x.ranges)-1].upper = r.upper
		return
	}
	x.ranges = append(x.ranges, r)
	x.rangeBytes += maxRangeHeader + len(r.ids)*protocol.IDSize
}

// fill adds to x the IDs to ask for, the missing ones, and as many of the
// messages asked for as the exchange's budget allows; ranges that are all
// skips are dropped. Once the session has sent its budget of message bytes
// (WithSessionBytes), what is still asked for is answered as missing: the
// peer asks again in a later session.
func (s *session) fill(x *exchange) error {
	if len(x.ranges) == 1 && x.ranges[0].mode == modeSkip {
		x.ranges = nil
	}
	if s.sent >= s.cfg.sessionBytes && len(s.toSend) > 0 {
		s.missing = append(s.missing, s.toSend...)
		s.stats.Unserved += len(s.toSend)
		s.toSend = nil
	}
	n := min(len(s.toWant), frameWants)
	x.wants, s.toWant = s.toWant[:n:n], s.toWant[n:]
	budget := s.cfg.msgBudget
	for len(s.toSend) > 0 && (budget > 0 || len(x.msgs) == 0) && s.sent < s.cfg.sessionBytes {
		limit := max(min(int64(budget), s.cfg.sessionBytes-s.sent), 1)
		wires, err := s.wires(s.toSend, int(limit))
		if err != nil {
			return err
		}
		if len(wires) == 0 || len(wires) > len(s.toSend) {
			return fmt.Errorf("wires: %d for %d IDs", len(wires), len(s.toSend))
		}
		for i, wire := range wires {
			if wire == nil {
				// Not held (never, or expired, or of another space): the
				// peer is told.
				s.missing = append(s.missing, s.toSend[i])
				continue
			}
			x.msgs = append(x.msgs, wire)
			budget -= len(wire)
			s.sent += int64(len(wire))
			s.stats.Sent++
		}
		s.toSend = s.toSend[len(wires):]
	}
	n = min(len(s.missing), frameWants)
	x.missing, s.missing = s.missing[:n:n], s.missing[n:]
	return nil
}

// wires reads the messages ids of the session's space as WireBatcher.Wires
// does: at once when the store is one, else one Wire at a time.
func (s *session) wires(ids []protocol.ID, limit int) ([][]byte, error) {
	if wb, ok := s.st.(WireBatcher); ok {
		wires, err := wb.Wires(s.space, ids, limit)
		if err != nil {
			return nil, fmt.Errorf("wires: %w", err)
		}
		return wires, nil
	}
	var wires [][]byte
	read := 0
	for _, id := range ids {
		if read >= limit && len(wires) > 0 {
			break
		}
		wire, ok, err := s.st.Wire(s.space, id)
		if err != nil {
			return nil, fmt.Errorf("wire %s: %w", id, err)
		}
		if !ok {
			wire = nil
		}
		wires = append(wires, wire)
		read += len(wire)
	}
	return wires, nil
}

// delivery is one exchange's messages on their way to the Sink.
type delivery struct {
	// prev is the exchange before, whose messages are stored first (nil
	// once applied); done is closed once these are stored (or refused).
	prev     *delivery
	done     chan struct{}
	count    int           // messages in the exchange
	received []protocol.ID // valid messages of the space (no longer wanted)
	// kept are the IDs of the messages stored (not declined), parents the
	// parents they name: only these, not the messages, are kept until the
	// session applies the delivery (at its next exchange), so that the
	// messages, and the frame they came in, are freed once stored.
	kept    []protocol.ID
	parents []protocol.ID
	dropped int
	err     error
}

// startReceive validates the peer's messages exactly as gossip is
// validated and hands the valid ones to the Sink, in the background; settle
// applies the outcome. Expired and future-dated messages are dropped
// (clocks differ; they are not the peer's fault); anything else invalid,
// or of another space, refuses the peer. Nil when there are none.
//
// They are handed to the Sink after those of prev (the exchange before,
// possibly nil), and not at all if that failed.
func (s *session) startReceive(ctx context.Context, wires [][]byte, prev *delivery) *delivery {
	if len(wires) == 0 {
		return nil
	}
	d := &delivery{done: make(chan struct{}), prev: prev, count: len(wires)}
	go func() {
		defer close(d.done)
		d.err = s.receive(ctx, d, wires)
	}()
	return d
}

// last is the newest delivery in flight, nil when none.
func (s *session) last() *delivery {
	if len(s.inflight) == 0 {
		return nil
	}
	return s.inflight[len(s.inflight)-1]
}

// settle waits for the messages in flight, counts them and asks for the
// parents they name that we lack.
func (s *session) settle() error {
	for len(s.inflight) > 0 {
		if err := s.applyOldest(); err != nil {
			s.drain()
			return err
		}
	}
	s.inflight = nil
	return nil
}

// applyOldest takes the oldest delivery in flight and applies it.
func (s *session) applyOldest() error {
	d := s.inflight[0]
	s.inflight = s.inflight[1:]
	return s.apply(d)
}

// drain waits for the deliveries still in flight after one failed (they
// fail too, see receive) and drops them.
func (s *session) drain() {
	for _, d := range s.inflight {
		<-d.done
	}
	s.inflight = nil
}

// apply waits for d (if not nil) and applies its outcome to the session,
// as settle does.
func (s *session) apply(d *delivery) error {
	if d == nil {
		return nil
	}
	<-d.done
	d.prev = nil // applied before d: no need to keep it
	for _, id := range d.received {
		if _, ok := s.wanted[id]; ok {
			delete(s.wanted, id)
			s.fetched++
		}
	}
	s.stats.Dropped += d.dropped
	s.stats.Received += len(d.kept)
	if d.err != nil {
		return d.err
	}
	if s.got == nil {
		s.got = make(map[protocol.ID]struct{})
	}
	for _, id := range d.kept {
		if len(s.got) < maxGot {
			s.got[id] = struct{}{}
		}
	}
	for _, p := range d.parents {
		if err := s.want(p); err != nil {
			return err
		}
	}
	return nil
}

// receive is startReceive's work, into d. It reads only what does not
// change during a session (space, floor, sink, cfg).
func (s *session) receive(ctx context.Context, d *delivery, wires [][]byte) error {
	now := s.cfg.now()
	msgs := make([]*protocol.Message, len(wires))
	errs := make([]error, len(wires))
	// In chunks, each checked by one ValidateAll (which shares a field
	// inversion among its messages' signatures), a few per validator.
	size := min(maxValidateChunk, max(minValidateChunk, (len(wires)+4*s.cfg.validators-1)/(4*s.cfg.validators)))
	parallel((len(wires)+size-1)/size, s.cfg.validators, func(c int) {
		lo, hi := c*size, min(len(wires), (c+1)*size)
		ms, es := s.cfg.verifier.ValidateAll(wires[lo:hi], now, s.cfg.limits)
		copy(msgs[lo:hi], ms)
		copy(errs[lo:hi], es)
	})
	var ok []*protocol.Message
	for i, m := range msgs {
		switch err := errs[i]; {
		case errors.Is(err, protocol.ErrExpired), errors.Is(err, protocol.ErrClockSkew):
			d.dropped++
			continue
		case err != nil:
			return fmt.Errorf("%w: message %d of exchange: %v", ErrRefused, i, err)
		case m.Space != s.space:
			// Honest peers serve only the session's space (a prev may name
			// a message of another space: we ask, they say missing).
			return fmt.Errorf("%w: message %s belongs to space %s", ErrRefused, m.ID, m.Space)
		}
		d.received = append(d.received, m.ID)
		if protocol.KeyOf(m).Less(s.floor) {
			d.dropped++ // below the window: we would not keep it
			continue
		}
		ok = append(ok, m)
	}
	// Parents first, as far as created_at tells.
	slices.SortFunc(ok, func(a, b *protocol.Message) int { return protocol.KeyOf(a).Compare(protocol.KeyOf(b)) })
	if p := d.prev; p != nil {
		<-p.done
		if p.err != nil {
			return fmt.Errorf("the exchange before failed: %w", p.err)
		}
	}
	var derrs []error
	if b, isBatch := s.sink.(BatchSink); isBatch {
		derrs = b.DeliverBatch(ctx, ok)
		if len(derrs) != len(ok) {
			return fmt.Errorf("deliver: %d results for %d messages", len(derrs), len(ok))
		}
	} else {
		derrs = make([]error, len(ok))
		parallel(len(ok), deliverWorkers, func(i int) { derrs[i] = s.sink.Deliver(ctx, ok[i]) })
	}
	for i, err := range derrs {
		switch {
		case errors.Is(err, ErrDeclined):
			d.dropped++
		case err != nil:
			return fmt.Errorf("deliver %s: %w", ok[i].ID, err)
		default:
			d.kept = append(d.kept, ok[i].ID)
			d.parents = append(d.parents, ok[i].Prev...)
		}
	}
	return nil
}

// minValidateChunk and maxValidateChunk bound the messages of an exchange
// one validator checks at once (see receive): the one inversion of a
// chunk costs about a fifth of a signature check, so 8 make it small, and
// 128 keep several chunks per validator in an exchange of thousands.
const (
	minValidateChunk = 8
	maxValidateChunk = 128
)

// parallel runs fn(0…n-1) on up to workers goroutines and waits.
func parallel(n, workers int, fn func(int)) {
	if n <= 1 || workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, workers) {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func keyIDs(keys []protocol.SyncKey) []protocol.ID {
	ids := make([]protocol.ID, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return ids
}
