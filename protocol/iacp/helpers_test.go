package iacp_test

import (
	"flag"

	"github.com/weftmesh/weft/protocol/internal/prototest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.export.json from what Export writes")

// goldenSeed is the Ed25519 seed of protocol's golden vectors
// (protocol/testdata/golden.json), so agent A here is the golden sender.
const goldenSeed = "776566742d676f6c64656e2d766563746f72732d7365656428763129000102ff"

// Shared with protocol's sub-packages' tests.
var (
	created      = prototest.Created
	keyFromSeed  = prototest.KeyFromSeed
	testKey      = prototest.Key
	peerOf       = prototest.PeerOf
	mustHex      = prototest.MustHex
	sign         = prototest.Sign
	minimalDraft = prototest.MinimalDraft
)
