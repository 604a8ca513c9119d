package main

import (
	"context"
	"fmt"

	"github.com/weftmesh/weft/mesh"
)

// runNetworkKey makes a network key file: `weft network-key new FILE`.
func runNetworkKey(_ context.Context, e *env, args []string) error {
	pos, err := parse(e.flags("network-key"), args, 2)
	if err != nil {
		return err
	}
	if pos[0] != "new" {
		return usageError{fmt.Sprintf("unknown subcommand %q (want new)", pos[0])}
	}
	k, err := mesh.WriteNetworkKey(pos[1])
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote network key %s (fingerprint %s)\n", pos[1], mesh.NetworkKeyFingerprint(k))
	fmt.Fprintln(e.stderr, "keep it secret; copy it (mode 0600) to every node of the mesh and run: weft daemon --network-key FILE")
	return nil
}
