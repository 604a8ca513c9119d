// Package netbed runs weft on separate machines: its tests build networks
// out of Linux network namespaces (examples/internal/netns), run one real
// `weft daemon` process per host, and check what loopback tests cannot:
//
//   - routed: two subnets joined by a router; hosts on the second know one
//     bootstrap address on the first, and the DHT finds the rest; a space
//     spans both, and capability discovery works across them.
//   - NAT: hosts behind NATs (nftables masquerade, cone and symmetric)
//     reach the mesh through a circuit relay on a public weft node and,
//     where the NAT allows, a direct connection by hole punching (DCUtR).
//   - punch again: two pairs behind cone NATs whose first punches are
//     blocked; the pair with --punch-again goes direct by weft's own tries
//     once the NATs let it, the pair without stays relayed.
//   - churn: 8 hosts; daemons killed and restarted and links cut and
//     restored at random while messages flow; after the last heal every
//     host has every message.
//
// The LAN scenario (4 hosts finding each other by mDNS) is
// examples/lan-demo. Each test logs a "summary" line with its figures. The
// tests need root (network namespaces) and skip without it; the NAT test
// also needs nftables (.ci/run installs it). Nothing leaves the machine:
// the namespaces have no link to the machine's own network.
//
//	sudo go test -v -run . ./examples/netbed
package netbed
