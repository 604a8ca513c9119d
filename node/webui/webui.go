// Package webui is the daemon's live web view: one page (plain HTML, CSS
// and JavaScript embedded in the binary, no build step) served on the
// daemon's loopback listener (node/web), for a person who wants to see
// what their agents are doing: the node, its peers, spaces and their
// messages arriving live, the message graph, direct messages, handlers
// and calls in flight, discovery.
//
// The page has no API of its own: it uses the local API, the one every
// client uses, mounted under /api/v1/ on the listener, and follows spaces
// and the inbox through its server-sent events. On the listener the web
// package's checks stand where the socket's refusal of browser requests
// stands: the token (as the session cookie the page's URL sets), the Host
// and Origin of every request, and a CSP that admits only the page's own
// files.
package webui

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/weftmesh/weft/node/web"
)

//go:embed assets
var assets embed.FS

// Paths on the listener.
const (
	// Page is the page's path: open web.Server.URL(Page).
	Page = "/"
	// APIPrefix is where the local API is mounted: /api/v1/node is the
	// API's /v1/node.
	APIPrefix = "/api"
	// AssetPrefix is where the page's scripts and styles are served.
	AssetPrefix = "/ui/"
)

// Mount serves the page on s: the page itself behind web.Browser (its URL
// with ?token= sets the session cookie), its assets and api (the local
// API's handler for browsers, localapi.API.ForBrowsers) behind the token
// or the cookie. Only the API's /v1/ routes are mounted.
func Mount(s *web.Server, api http.Handler) {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded folder is part of the binary
	}
	s.Handle("GET "+Page+"{$}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	}), web.Browser)
	s.Handle("GET "+AssetPrefix, sameOrigin(http.StripPrefix(AssetPrefix[:len(AssetPrefix)-1], http.FileServerFS(static))), web.Bearer)
	s.Handle(APIPrefix+"/v1/", sameOrigin(http.StripPrefix(APIPrefix, api)), web.Bearer)
}

// sameOrigin refuses requests that a browser says another site or origin
// made (Sec-Fetch-Site). The listener refuses a foreign Origin, but a
// browser sends none with a plain GET of an image or a script, and sends
// the session cookie along from any page of the same site: 127.0.0.1 on
// another port is one. The page's own requests are same-origin; clients
// other than browsers send no Sec-Fetch-Site and are let through.
func sameOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "same-origin", "none":
			h.ServeHTTP(w, r)
		default:
			http.Error(w, "forbidden: a request from another site", http.StatusForbidden)
		}
	})
}
