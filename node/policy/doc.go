// Package policy decides who may reach a node: the trust list (peers the
// user trusts, kept in a small JSON file), the call policy of each handler
// (trusted peers, listed peers, or anyone) and the DM policy of the inbox
// (who may put messages there, at what rate, and how many each stranger
// may have held at once).
//
// It holds decisions only: no network, no store, no HTTP. Time enters only
// as an argument (Gate.Admit's now), so rates and quotas are tested
// without sleeping. The node (package node) applies the decisions: before
// a call reaches a handler, and before a direct message is stored.
//
// A stranger is any peer not on the trust list. A peer ID costs nothing,
// so no limit rests on an ID alone: besides each stranger's own rate and
// quota, all strangers together share one rate and one quota, which bound
// what a flood from many fresh identities can cost.
package policy
