package mesh

import (
	"log/slog"
	"net"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Gossipsub peer scoring, with parameters chosen for weft's spaces: many
// small topics (one per space), each with a handful of members, quiet for
// hours and then busy for a minute while agents hand work around. The
// references are the public parameter sets of Filecoin (lotus,
// build/params and node/modules/lp2p/pubsub.go) and of Ethereum's
// consensus clients (Lighthouse's gossipsub_scoring_parameters, Prysm's
// p2p/gossip_scoring_params); the numbers are on our own scale.
//
// The scale: a member's good behaviour earns at most +60 in a space
// (time in the mesh and first deliveries) and +50 over all spaces
// (TopicScoreCap), so that no peer banks enough goodwill to shield a
// flood. Penalties are quadratic and reach the graylist threshold (-400)
// within a few offences: three invalid messages (-900), some 30 messages
// over a rate (10 forgiven), or some 13 broken gossip promises (6
// forgiven).
const (
	// Below gossipThreshold a peer gets no gossip (IHAVE) from us and its
	// own is ignored; below publishThreshold we do not flood-publish to
	// it; below graylistThreshold every RPC it sends is dropped unread,
	// which is what ends a flood: the cost of a graylisted peer is
	// reading its bytes off the connection.
	gossipThreshold   = -100
	publishThreshold  = -200
	graylistThreshold = -400
	// acceptPXThreshold: peer exchange (PX, the peers offered with a
	// PRUNE) is taken only from a peer that has earned a score by
	// delivering messages first (20 of the cap of 50): a stranger's PX
	// could point us at its sybils. Lotus takes PX from bootstrappers
	// only (1000); weft has no trusted bootstrappers, and finds members by
	// the DHT rendezvous and mDNS anyway.
	acceptPXThreshold = 20
	// opportunisticGraftThreshold: when the median score of a space's
	// mesh is below it, gossipsub grafts a couple of better-scored peers.
	// In a quiet space most scores are 0 and this only reshuffles the mesh
	// now and then, towards members that deliver.
	opportunisticGraftThreshold = 1
)

// topicScoreCap is the most that good behaviour in all spaces adds to a
// peer's score.
const topicScoreCap = 50

// scoreDecayInterval is how often counters decay; scoreDecayToZero is
// the value below which a counter is taken as zero. Gossipsub's defaults,
// as lotus and Ethereum use.
const (
	scoreDecayInterval = time.Second
	scoreDecayToZero   = 0.01
)

// topicScoreParams are the score parameters of a space's topic.
func topicScoreParams() *pubsub.TopicScoreParams {
	return &pubsub.TopicScoreParams{
		TopicWeight: 1,

		// P1, time in the mesh: up to +10, after an hour in the space's
		// mesh (a sixth of a point a minute), so that a long-standing member
		// outranks a newcomer when the mesh is trimmed.
		TimeInMeshWeight:  1.0 / 6,
		TimeInMeshQuantum: time.Minute,
		TimeInMeshCap:     60,

		// P2, first deliveries: +1 for each message a peer is the first to
		// bring us, up to 50, decaying over an hour (lotus's messages topic
		// decays over 10 minutes, its blocks over an hour; agent spaces are
		// slower than either). It rewards the members and relays that
		// actually carry the space.
		FirstMessageDeliveriesWeight: 1,
		FirstMessageDeliveriesDecay:  pubsub.ScoreParameterDecay(time.Hour),
		FirstMessageDeliveriesCap:    50,

		// P3 and P3b, mesh delivery rate: off. They penalise a mesh peer
		// that delivers fewer messages than a threshold, which assumes a
		// steady flow: in a space quiet for an hour every honest member
		// would fall below any threshold, be pruned, and the small mesh
		// would split. Lotus turned them off for the same reason ("the
		// network is still too small, which results in asymmetries and
		// potential unmeshing from negative scores"), and Ethereum's
		// clients left them off, or weak, on their quiet topics after they
		// penalised honest peers there.
		MeshMessageDeliveriesWeight: 0,
		MeshFailurePenaltyWeight:    0,

		// P4, invalid messages: strong. An honest node never forwards a
		// message that fails the protocol's checks (a bad signature, a
		// malformed frame, the wrong space): it validates before it
		// forwards. The square of the count times -100: one invalid message
		// costs 100 (below the gossip threshold), three take a peer below
		// the graylist threshold even with a full positive score. It decays
		// over an hour, as lotus's and Ethereum's do. What only this node's
		// policy refuses (its size limit, its quotas, its rates) is ignored,
		// never rejected, so that honest relays with other settings are not
		// punished (see validator).
		InvalidMessageDeliveriesWeight: -100,
		InvalidMessageDeliveriesDecay:  pubsub.ScoreParameterDecay(time.Hour),
	}
}

// peerScoreParams are the score parameters of every peer; app is the
// application-specific score (the flood guard's penalties, see
// floodGuard.score). Topics are added per space as it is joined.
func peerScoreParams(app func(peer.ID) float64) *pubsub.PeerScoreParams {
	return &pubsub.PeerScoreParams{
		Topics:        make(map[string]*pubsub.TopicScoreParams),
		TopicScoreCap: topicScoreCap,

		// P5: the flood guard's penalty, already on the score's scale.
		AppSpecificScore:  app,
		AppSpecificWeight: 1,

		// P6, IP colocation: many peer IDs behind one IP address are
		// likely one operator's sybils. But one machine may run several
		// agents, each with its own daemon, and an office NAT many: beyond
		// 10 peers on one address (or IPv6 /64) each peer loses 5 times the
		// square of the excess, so that from 15 on they get no gossip and
		// from 19 on they are graylisted. Loopback is never
		// counted (gossipsub skips it), nor private addresses, where the
		// peers are on this node's own network (lotus and Ethereum use a
		// threshold of 1–5 on public networks of dedicated servers).
		IPColocationFactorWeight:    -5,
		IPColocationFactorThreshold: 10,
		IPColocationFactorWhitelist: privateNets,

		// P7, behaviour: gossipsub adds 1 for each message a peer
		// advertised (IHAVE) and then did not send when asked (IWANT), and
		// for each GRAFT during a prune backoff. A loaded honest node may
		// miss a few; past 6, -10 times the square of the excess (as
		// lotus), decaying over an hour.
		BehaviourPenaltyWeight:    -10,
		BehaviourPenaltyThreshold: 6,
		BehaviourPenaltyDecay:     pubsub.ScoreParameterDecay(time.Hour),

		DecayInterval: scoreDecayInterval,
		DecayToZero:   scoreDecayToZero,
		// A peer with a negative score keeps it for an hour after it
		// disconnects: reconnecting does not wash a flooder clean.
		RetainScore: time.Hour,
	}
}

// peerScoreThresholds are the thresholds of the constants above.
func peerScoreThresholds() *pubsub.PeerScoreThresholds {
	return &pubsub.PeerScoreThresholds{
		GossipThreshold:             gossipThreshold,
		PublishThreshold:            publishThreshold,
		GraylistThreshold:           graylistThreshold,
		AcceptPXThreshold:           acceptPXThreshold,
		OpportunisticGraftThreshold: opportunisticGraftThreshold,
	}
}

// privateNets are the address ranges of a node's own networks (RFC 1918,
// carrier-grade NAT as used by overlay VPNs, IPv6 unique local and link
// local): peers there are not counted for IP colocation.
var privateNets = func() []*net.IPNet {
	var out []*net.IPNet
	for _, s := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "fc00::/7", "fe80::/10"} {
		_, n, _ := net.ParseCIDR(s)
		out = append(out, n)
	}
	return out
}()

// scoreInterval is how often the scores are read for GossipScore and the
// graylist log.
const scoreInterval = time.Second

// scoreBoard keeps the last reading of every peer's gossip score, logs
// when a peer falls below the graylist threshold and when it is back, and
// disconnects graylisted peers.
//
// Graylisting drops a peer's gossip unread, but it still costs reading
// and decoding every RPC it sends: thousands a second from a flooder, on
// the event loop every member's messages go through. So a graylisted peer
// is also disconnected, and disconnected again as soon as it reconnects
// (see Mesh.closeGraylisted); its score stays with gossipsub
// (RetainScore), so it stays graylisted until its penalties decay.
type scoreBoard struct {
	log        *slog.Logger
	now        func() time.Time
	disconnect func(peer.ID) bool // closes p's connections; false if none were open

	mu     sync.Mutex
	scores map[peer.ID]float64
	since  map[peer.ID]time.Time // graylisted peers: since when
	cut    map[peer.ID]time.Time // graylisted peers: last disconnected
}

// disconnectEvery is how often a graylisted peer still connected (one
// that reconnected before its score was read) is disconnected again.
const disconnectEvery = time.Second

func newScoreBoard(log *slog.Logger, now func() time.Time, disconnect func(peer.ID) bool) *scoreBoard {
	return &scoreBoard{log: log, now: now, disconnect: disconnect,
		scores: make(map[peer.ID]float64), since: make(map[peer.ID]time.Time), cut: make(map[peer.ID]time.Time)}
}

// inspect is gossipsub's score inspector (see pubsub.WithPeerScoreInspect).
func (b *scoreBoard) inspect(scores map[peer.ID]*pubsub.PeerScoreSnapshot) {
	for _, p := range b.read(scores) {
		if b.disconnect != nil && b.disconnect(p) {
			b.log.Info("gossip: disconnected a graylisted peer", "peer", p)
		}
	}
}

// read records scores and returns the graylisted peers to disconnect.
func (b *scoreBoard) read(scores map[peer.ID]*pubsub.PeerScoreSnapshot) []peer.ID {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	var cut []peer.ID
	defer func() {
		for _, p := range cut {
			b.cut[p] = now
		}
	}()
	clear(b.scores)
	for p, s := range scores {
		b.scores[p] = s.Score
		_, was := b.since[p]
		switch is := s.Score < graylistThreshold; {
		case is && !was:
			b.since[p] = now
			b.log.Warn("gossip: peer graylisted: its messages are dropped unread",
				"peer", p, "score", int(s.Score), "flood_penalty", int(s.AppSpecificScore),
				"behaviour_penalty", s.BehaviourPenalty, "invalid", invalidCount(s))
		case !is && was:
			delete(b.since, p)
			delete(b.cut, p)
			b.log.Info("gossip: peer no longer graylisted", "peer", p, "score", int(s.Score))
		}
		if s.Score < graylistThreshold && now.Sub(b.cut[p]) >= disconnectEvery {
			cut = append(cut, p)
		}
	}
	for p := range b.since {
		if _, ok := scores[p]; !ok {
			delete(b.since, p) // forgotten by gossipsub
			delete(b.cut, p)
		}
	}
	return cut
}

func invalidCount(s *pubsub.PeerScoreSnapshot) float64 {
	var n float64
	for _, t := range s.Topics {
		n += t.InvalidMessageDeliveries
	}
	return n
}

// graylisted reports whether p was graylisted when the scores were last
// read.
func (b *scoreBoard) graylisted(p peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.since[p]
	return ok
}

// score returns p's score as last read.
func (b *scoreBoard) score(p peer.ID) (float64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.scores[p]
	return s, ok
}

// GossipScore returns p's gossipsub score as last read (once a second),
// and whether gossipsub keeps one for p. Below GraylistThreshold, p's
// messages are dropped unread.
func (m *Mesh) GossipScore(p peer.ID) (float64, bool) { return m.board.score(p) }

// GraylistThreshold is the gossip score below which a peer is graylisted.
const GraylistThreshold = graylistThreshold

// FloodStats returns how many gossip messages the rate limits ignored.
func (m *Mesh) FloodStats() FloodStats { return m.guard.Stats() }
