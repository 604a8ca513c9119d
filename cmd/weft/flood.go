package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh"
	"github.com/weftmesh/weft/node"
)

// byteSize is a flag of a size in bytes: a number with an optional unit
// (KiB, MiB, GiB, or KB, MB, GB in powers of ten), or "none" (-1: no
// bound).
type byteSize int64

func (b *byteSize) String() string { return formatBytes(int64(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1},
}

func parseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "none" || t == "-1" {
		return -1, nil
	}
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || f*float64(mult) > math.MaxInt64/2 {
		return 0, fmt.Errorf("bad size %q: want bytes, e.g. 1048576, 512KiB, 64MiB, 1GiB (or none)", s)
	}
	return int64(f * float64(mult)), nil
}

func formatBytes(n int64) string {
	switch {
	case n < 0:
		return "none"
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return strconv.FormatInt(n, 10)
}

// rateFlag is a flag of a token bucket: RATE[:BURST] in messages per
// second, the burst defaulting to four seconds' worth.
type rateFlag mesh.Rate

func (r *rateFlag) String() string {
	if r == nil || r.PerSecond == 0 {
		return ""
	}
	return fmt.Sprintf("%g:%d", r.PerSecond, r.Burst)
}

func (r *rateFlag) Set(s string) error {
	rateText, burstText, hasBurst := strings.Cut(strings.TrimSpace(s), ":")
	rate, err := strconv.ParseFloat(strings.TrimSuffix(rateText, "/s"), 64)
	if err != nil || rate <= 0 || math.IsInf(rate, 0) {
		return fmt.Errorf("bad rate %q: want messages per second and a burst, e.g. 50:200", s)
	}
	burst := int(math.Ceil(4 * rate))
	if hasBurst {
		if burst, err = strconv.Atoi(burstText); err != nil || burst < 1 {
			return fmt.Errorf("bad burst in %q: want a whole number of messages, at least 1", s)
		}
	}
	*r = rateFlag{PerSecond: rate, Burst: burst}
	return nil
}

// floodFlags are the daemon's flood-resistance flags.
type floodFlags struct {
	author, strangers, peer rateFlag
	noRates                 *bool
	probation               *time.Duration
	spaceQuota, senderQuota byteSize
	maxMessage              byteSize
}

func addFloodFlags(fs *flag.FlagSet) *floodFlags {
	d := mesh.DefaultRateLimits()
	f := &floodFlags{
		author:      rateFlag(d.Author),
		strangers:   rateFlag(d.Strangers),
		peer:        rateFlag(d.Peer),
		spaceQuota:  byteSize(node.DefaultSpaceLimits.MaxBytes),
		senderQuota: byteSize(node.DefaultSpaceLimits.MaxSenderBytes),
	}
	fs.Var(&f.author, "rate-author", "gossip rate of one author in a space, RATE[:BURST] messages/s (this node's own agents' posts are paced below it and, in open spaces, within 40% of --rate-strangers)")
	fs.Var(&f.strangers, "rate-strangers", "gossip rate of all the authors this node does not know yet in a space, together, RATE[:BURST]")
	fs.Var(&f.peer, "rate-peer", "gossip rate of what one peer forwards in a space, RATE[:BURST]")
	f.noRates = fs.Bool("no-rate-limits", false, "turn the gossip rate limits off (a closed mesh of trusted peers)")
	f.probation = fs.Duration("stranger-probation", node.DefaultStrangerProbation, "how long this node must have held a message of an author before the author gets a rate of its own (0: at once)")
	fs.Var(&f.spaceQuota, "space-quota", "bytes a space may hold, unless set per space with `weft join --max-bytes` (none: no bound)")
	fs.Var(&f.senderQuota, "sender-quota", "bytes one sender may hold in a space, unless set per space (none: no bound)")
	fs.Var(&f.maxMessage, "max-message-size", "largest message body a space takes, unless set per space (default and at most 1MiB)")
	return f
}

// apply sets cfg's flood resistance from the flags.
func (f *floodFlags) apply(cfg *node.Config) error {
	cfg.Rates = mesh.RateLimits{Author: mesh.Rate(f.author), Strangers: mesh.Rate(f.strangers), Peer: mesh.Rate(f.peer), Off: *f.noRates}
	cfg.StrangerProbation = *f.probation
	if cfg.StrangerProbation <= 0 {
		cfg.StrangerProbation = -1 // at once
	}
	cfg.SpaceLimits.MaxBytes = int64(f.spaceQuota)
	cfg.SpaceLimits.MaxSenderBytes = int64(f.senderQuota)
	switch m := int64(f.maxMessage); {
	case m < 0:
		return usageError{"--max-message-size: none is not a size; leave it out for the message limit"}
	case m > int64(cfg.Limits.MaxSize):
		return usageError{fmt.Sprintf("--max-message-size %s is above the message limit of %s", formatBytes(m), formatBytes(int64(cfg.Limits.MaxSize)))}
	default:
		cfg.SpaceLimits.MaxMessageSize = int(m)
	}
	return nil
}
