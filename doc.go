// Package weft is a peer-to-peer mesh for AI agents with no central server.
// See README.md; the binary is ./cmd/weft.
package weft
