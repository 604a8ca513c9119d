package call

import (
	"encoding/json"

	"github.com/weftmesh/weft/internal/jsonx"
	"github.com/weftmesh/weft/protocol"
)

// parseRequest reads b into r if b is a call request in the plain form a
// weft caller writes: an object whose keys are CallRequest's, each once
// and spelled so, with strings without escapes, input any JSON value but
// null, and nothing after it but white space. It reports false for
// anything else, which encoding/json then reads; what it accepts it reads
// as encoding/json does (TestParseRequestMatchesJSON, FuzzParseRequest).
// encoding/json's reflection over every request was a tenth of a callee
// daemon's CPU in weft bench's invoke scenario. Input is a part of b.
func parseRequest(b []byte, r *protocol.CallRequest) bool {
	p := jsonx.Scanner{B: b}
	return p.Fields(requestFields, func(i int) bool {
		var ok bool
		switch i {
		case 0:
			ok = p.StringTo(&r.Name)
		case 1:
			var v []byte
			v, ok = p.Value()
			r.Input = json.RawMessage(v)
		case 2:
			r.Meta, ok = p.PlainMap()
		case 3:
			r.Deadline, ok = p.Integer()
		default:
			r.Stream, ok = p.Bool()
		}
		return ok
	})
}

// requestFields are the keys parseRequest reads, in its order.
var requestFields = []string{"name", "input", "meta", "deadline", "stream"}
