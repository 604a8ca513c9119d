package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/weftmesh/weft/protocol/api"
)

func runSend(ctx context.Context, e *env, args []string) error {
	fs := e.flags("send")
	text := fs.String("text", "", "send {\"text\": TEXT}")
	data, out := addDataFlags(fs, "send this object as the content")
	typ := fs.String("type", "", "message type (default \"text\")")
	var ttl ttlFlag
	fs.Var(&ttl, "ttl", "expire the message after this long, e.g. 90s or 24h (a number alone: seconds; default never)")
	var refs, to, meta stringList
	fs.Var(&refs, "ref", "ID of a message this one replies to (repeatable)")
	fs.Var(&to, "to", "peer ID this message is addressed to (repeatable)")
	fs.Var(&meta, "meta", "metadata KEY=VALUE (repeatable)")
	printJSONFlag := fs.Bool("print-json", false, "the same as --json")
	pos, err := parseAny(fs, args)
	if err != nil {
		return err
	}
	pos, obj, err := takeLegacyInput(e, pos, 1, *data, out)
	if err != nil {
		return err
	}
	asJSON := new(bool)
	*asJSON = out.on || *printJSONFlag
	req := api.SendRequest{Type: *typ, TTL: ttl.seconds()}
	if req.Content, err = contentFlag(*text, obj); err != nil {
		return err
	}
	if len(refs) > 0 || len(to) > 0 {
		req.Refs = &api.Refs{Messages: refs, Nodes: to}
	}
	if req.Meta, err = metaFlag(meta); err != nil {
		return err
	}
	m, err := e.client().Send(ctx, pos[0], req)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.stdout, m)
	}
	fmt.Fprintln(e.stdout, m.ID)
	return nil
}

// contentFlag turns --text or --data into a content object.
func contentFlag(text, obj string) (json.RawMessage, error) {
	switch {
	case (text == "") == (obj == ""):
		return nil, usageError{"give exactly one of --text and --data"}
	case text != "":
		b, _ := json.Marshal(map[string]string{"text": text})
		return b, nil
	case !json.Valid([]byte(obj)):
		return nil, usageError{"--data is not valid JSON"}
	}
	return json.RawMessage(obj), nil
}

// metaFlag turns repeated --meta KEY=VALUE into a map (nil when none).
func metaFlag(kvs []string) (map[string]string, error) {
	var meta map[string]string
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Sprintf("--meta %q: want KEY=VALUE", kv)}
		}
		if meta == nil {
			meta = map[string]string{}
		}
		meta[k] = v
	}
	return meta, nil
}
