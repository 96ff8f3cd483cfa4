package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kbroker/kbroker/controller"
	"github.com/kbroker/kbroker/replica"
)

// A log dir that fails takes only its replicas offline (replica/
// logdir_failure.go); the broker serves the others. This file wires it:
// the coordinators of offline __consumer_offsets and __transaction_state
// partitions resign, the controller is told which replicas are offline
// (controller/logdirs.go) so that it moves their leadership to other
// replicas and takes them out of their ISRs, and a broker left with no
// usable log dir stops, as Kafka halts then.

// logDirFailureReporter is the control plane's side of a log dir failure
// (*controller.Cluster).
type logDirFailureReporter interface {
	ReportLogDirFailure(ctx context.Context, r controller.LogDirFailureReport) error
}

// logDirReportRetry spaces attempts to tell the controller (a ZooKeeper
// write) after one failed.
const logDirReportRetry = time.Second

// logDirReports hands the latest report to the goroutine that sends it.
type logDirReports struct {
	mu     sync.Mutex
	latest *controller.LogDirFailureReport
	wake   chan struct{} // capacity 1
}

// onLogDirFailure is the replica layer's OnLogDirFailure.
func (b *Broker) onLogDirFailure(f replica.LogDirFailure) {
	for _, tp := range f.Partitions {
		b.resignCoordinator(tp)
	}
	if f.AllOffline {
		err := fmt.Errorf("every log dir is offline (%d); the last to fail, %s: %w", len(f.OfflineDirs), f.Dir, f.Err)
		select {
		case b.fatal <- err:
		default:
		}
		return
	}
	r := &controller.LogDirFailureReport{LogDirs: f.OfflineDirs}
	for _, tp := range f.OfflineReplicas {
		r.Partitions = append(r.Partitions, controller.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	b.logDirReports.mu.Lock()
	b.logDirReports.latest = r
	b.logDirReports.mu.Unlock()
	select {
	case b.logDirReports.wake <- struct{}{}:
	default:
	}
}

// runLogDirFailures starts the replica layer's failure handler and the
// goroutine that tells the controller, until ctx ends.
func (b *Broker) runLogDirFailures(ctx context.Context, wg *sync.WaitGroup) {
	// Before the handler runs: it is the only caller of onLogDirFailure.
	b.logDirReports.wake = make(chan struct{}, 1)
	wg.Add(2)
	go func() {
		defer wg.Done()
		b.replicas.RunLogDirFailureHandler(ctx)
	}()
	go func() {
		defer wg.Done()
		b.reportLogDirFailures(ctx)
	}()
}

// reportLogDirFailures tells the controller of every new report, retrying
// until it is written or ctx ends (the latest report replaces one not yet
// written: each names every offline replica).
func (b *Broker) reportLogDirFailures(ctx context.Context) {
	reporter, ok := b.controller.(logDirFailureReporter)
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.logDirReports.wake:
		}
		for {
			b.logDirReports.mu.Lock()
			r := b.logDirReports.latest
			b.logDirReports.mu.Unlock()
			if !ok {
				b.logger.Error("cannot tell the controller of the failed log dirs", "log_dirs", r.LogDirs)
				break
			}
			wctx, cancel := context.WithTimeout(ctx, max(b.cfg.ZookeeperSessionTimeout+b.cfg.ZookeeperConnectionTimeout, 10*time.Second))
			err := reporter.ReportLogDirFailure(wctx, *r)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			b.logger.Warn("telling the controller of the failed log dirs failed; retrying", "retry_in", logDirReportRetry, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(logDirReportRetry):
			}
		}
	}
}

// withoutOfflineReplicaErrors drops the errors of replicas in offline log
// dirs from the errors of applying a view: every view names them until
// the controller hears of the failure, or until the broker restarts (a
// deletion of their topic), and each such error was logged when the dir
// failed.
func withoutOfflineReplicaErrors(errs []error) []error {
	out := errs[:0]
	for _, err := range errs {
		if !errors.Is(err, replica.ErrLogDirOffline) {
			out = append(out, err)
		}
	}
	return out
}
