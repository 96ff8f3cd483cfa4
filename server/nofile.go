package server

import (
	"golang.org/x/sys/unix"
)

// Open-file limit. Go (1.19 and later, on Linux and the BSDs) already
// raises the process's soft RLIMIT_NOFILE to the hard limit when it starts
// (package syscall's init; the original soft limit is restored for child
// processes), so there is normally nothing to raise here: raiseOpenFileLimit
// only does it where that did not happen, and the broker logs the limit it
// has, warning when it looks too low for the partitions it holds.

// Descriptor budget for the warning: a base for connections and everything
// else, plus what each segment keeps open (its .log; the .index and
// .timeindex are mapped, .txnindex opened when used) and each partition's
// own files (a rolled segment's flush, checkpoints, snapshots).
const (
	nofileBase         = 4096
	nofilePerSegment   = 2
	nofilePerPartition = 2
)

// nofileWanted is the open-file limit below which the broker warns.
func nofileWanted(partitions, segments int) uint64 {
	return nofileBase + uint64(nofilePerPartition*partitions+nofilePerSegment*segments)
}

// raiseOpenFileLimit sets the soft open-file limit to the hard one if it is
// lower, and returns the limit in effect.
func raiseOpenFileLimit() (soft, hard uint64, err error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	if rl.Cur < rl.Max {
		raised := unix.Rlimit{Cur: rl.Max, Max: rl.Max}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err != nil {
			return rl.Cur, rl.Max, err
		}
		rl = raised
	}
	return rl.Cur, rl.Max, nil
}

// checkOpenFileLimit raises the open-file limit if it can, logs it, and
// warns when it is low for the partitions and segments held.
func (b *Broker) checkOpenFileLimit() {
	soft, hard, err := raiseOpenFileLimit()
	if err != nil {
		b.logger.Warn("cannot raise the open-file limit", "soft", soft, "hard", hard, "err", err)
	}
	partitions, segments := 0, 0
	for _, p := range b.replicas.All() {
		partitions++
		segments += p.Log().NumSegments()
	}
	want := nofileWanted(partitions, segments)
	if soft < want {
		b.logger.Warn("open-file limit is low: clients or segment files may run out of descriptors; raise it (ulimit -n, LimitNOFILE= in systemd)",
			"limit", soft, "hard_limit", hard, "recommended_at_least", want, "partitions", partitions, "segments", segments)
		return
	}
	b.logger.Info("open-file limit", "limit", soft, "hard_limit", hard, "partitions", partitions, "segments", segments)
}
