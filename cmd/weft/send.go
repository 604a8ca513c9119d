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
	obj := fs.String("json", "", "send this JSON object as the content")
	typ := fs.String("type", "", "message type (default \"text\")")
	ttl := fs.Int64("ttl", 0, "seconds until the message expires (0 = never)")
	var refs, to, meta stringList
	fs.Var(&refs, "ref", "ID of a message this one replies to (repeatable)")
	fs.Var(&to, "to", "peer ID this message is addressed to (repeatable)")
	fs.Var(&meta, "meta", "metadata KEY=VALUE (repeatable)")
	asJSON := fs.Bool("print-json", false, "print the stored message as JSON instead of its ID")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	req := api.SendRequest{Type: *typ, TTL: *ttl}
	switch {
	case (*text == "") == (*obj == ""):
		return usageError{"give exactly one of --text and --json"}
	case *text != "":
		req.Content, _ = json.Marshal(map[string]string{"text": *text})
	default:
		if !json.Valid([]byte(*obj)) {
			return usageError{"--json is not valid JSON"}
		}
		req.Content = json.RawMessage(*obj)
	}
	if len(refs) > 0 || len(to) > 0 {
		req.Refs = &api.Refs{Messages: refs, Nodes: to}
	}
	for _, kv := range meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageError{fmt.Sprintf("--meta %q: want KEY=VALUE", kv)}
		}
		if req.Meta == nil {
			req.Meta = map[string]string{}
		}
		req.Meta[k] = v
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
