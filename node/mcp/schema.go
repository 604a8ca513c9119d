package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"

	"github.com/weftmesh/weft/internal/jsonx"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// object is a JSON object argument, passed on to the daemon as written
// (content is signed as the model wrote it: no re-encoding, no float
// rounding of large numbers).
type object json.RawMessage

// value is any JSON value, passed on as written.
type value json.RawMessage

func (o object) MarshalJSON() ([]byte, error)  { return rawOrNull(o), nil }
func (o *object) UnmarshalJSON(b []byte) error { *o = append((*o)[:0], b...); return nil }
func (v value) MarshalJSON() ([]byte, error)   { return rawOrNull(v), nil }
func (v *value) UnmarshalJSON(b []byte) error  { *v = append((*v)[:0], b...); return nil }

func rawOrNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// integer is an integer argument. It also accepts whole numbers written as
// floats (10.0, 1e3), as clients that carry arguments as doubles send them:
// JSON Schema calls those integers too.
type integer int64

func (n *integer) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return fmt.Errorf("%s is not a whole number", b)
	}
	*n = integer(f)
	return nil
}

// typeSchemas are the schemas of the raw JSON argument types.
var typeSchemas = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[object](): {Type: "object"},
	reflect.TypeFor[value]():  {},
}

// singleTypes makes each property of s that may be null (a Go slice or
// map) take one type: optional arguments are left out, not null, and one
// type per property is what the strictest tool-schema dialects accept.
func singleTypes(s *jsonschema.Schema) {
	for _, p := range s.Properties {
		if len(p.Types) == 2 && slices.Contains(p.Types, "null") {
			p.Type = p.Types[0]
			if p.Type == "null" {
				p.Type = p.Types[1]
			}
			p.Types = nil
		}
	}
}

// addTool adds a tool whose arguments are In (its input schema is derived
// from In: fields without omitempty are required, jsonschema tags describe
// them) and whose handler answers a JSON object or fails. Arguments that do
// not match the schema, and errors from h, become tool errors with a
// message a model can act on. tweaks refine the derived schema (bounds,
// enums).
func addTool[In any](s *mcp.Server, t *mcp.Tool, h func(context.Context, In) (any, error), tweaks ...func(*jsonschema.Schema)) {
	schema, err := jsonschema.For[In](&jsonschema.ForOptions{TypeSchemas: typeSchemas})
	if err != nil {
		panic(fmt.Sprintf("mcp tool %s: %v", t.Name, err))
	}
	if schema.Properties == nil {
		// "properties" present even when empty: some hosts refuse an
		// object schema without it.
		schema.Properties = map[string]*jsonschema.Schema{}
	}
	singleTypes(schema)
	for _, tweak := range tweaks {
		tweak(schema)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcp tool %s: %v", t.Name, err))
	}
	t.InputSchema = schema
	s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		in, err := decodeArgs[In](req.Params.Arguments, resolved)
		if err != nil {
			return errorResult(err), nil
		}
		out, err := h(ctx, in)
		if err != nil {
			return errorResult(explain(err)), nil
		}
		b, err := marshal(out)
		if err != nil {
			return errorResult(err), nil
		}
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
			StructuredContent: json.RawMessage(b),
		}, nil
	})
}

// decodeArgs validates raw arguments against the tool's schema and decodes
// them into an In.
func decodeArgs[In any](raw json.RawMessage, resolved *jsonschema.Resolved) (In, error) {
	var in In
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return in, fmt.Errorf("invalid arguments: not JSON: %v", err)
	}
	if _, ok := generic.(map[string]any); !ok {
		return in, errors.New("invalid arguments: they must be a JSON object")
	}
	if err := resolved.Validate(generic); err != nil {
		return in, fmt.Errorf("invalid arguments: %v (the tool's input schema lists the fields and their types)", err)
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return in, fmt.Errorf("invalid arguments: %v", err)
	}
	return in, nil
}

// marshal is jsonx.Marshal: agents' JSON as they wrote it.
var marshal = jsonx.Marshal

// errorResult is a tool error saying err.
func errorResult(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
}
