package server

import (
	"log/slog"
	"os"
	"strconv"
	"syscall"
)

// cleanerKillEnv names the point of the log cleaner's swap protocol at
// which the broker kills itself with SIGKILL (crash tests only, see
// integration/compaction_test.go): "3" dies at the fourth point of the
// first cleaning that reaches it. Unset or invalid: no hook.
const cleanerKillEnv = "KBROKER_TEST_CLEANER_KILL_AT"

// cleanerKillHook returns the hook for the cleaner's Hook, or nil.
func cleanerKillHook(logger *slog.Logger) func(point int) error {
	v := os.Getenv(cleanerKillEnv)
	k, err := strconv.Atoi(v)
	if v == "" || err != nil || k < 0 {
		return nil
	}
	logger.Warn("test hook: the log cleaner kills this broker at a point of its swap", "env", cleanerKillEnv, "point", k)
	return func(point int) error {
		if point == k {
			logger.Warn("test hook: killing the broker inside a cleaning", "point", point)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way; do not go on with the cleaning
		}
		return nil
	}
}
