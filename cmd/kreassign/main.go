// Command kreassign moves partition replicas between brokers, as Kafka's
// kafka-reassign-partitions.sh does (same actions, same JSON file format,
// same messages), with a better --generate: the plan comes from package
// rebalance, which keeps replicas where they are whenever the balance
// allows, so adding or draining a broker copies about what must be copied
// rather than reshuffling everything. --drain B is --generate onto every
// broker but B; --wait polls --verify until the reassignment completes.
//
// Requests go to any broker of --bootstrap-server; franz-go sends
// AlterPartitionReassignments and ListPartitionReassignments to the
// controller.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Exit statuses.
const (
	exitOK         = 0
	exitError      = 1 // the request failed, or the cluster refused it
	exitUsage      = 2
	exitIncomplete = 3 // --verify / --wait: some partition is not at its target
)

// clientID is the client.id Kafka's tool uses.
const clientID = "reassign-partitions-tool"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status. Results go to
// stdout, errors to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "kreassign:", err)
		return exitUsage
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.bootstrap...),
		kgo.ClientID(clientID),
		// NOT_CONTROLLER and a moving controller are retried within this.
		kgo.RetryTimeout(min(o.timeout, 30*time.Second)),
	}
	if o.commandConfig != "" {
		props, err := readProperties(o.commandConfig)
		if err != nil {
			fmt.Fprintln(stderr, "kreassign: --command-config:", err)
			return exitUsage
		}
		sec, err := securityOpts(props)
		if err != nil {
			fmt.Fprintln(stderr, "kreassign: --command-config:", err)
			return exitUsage
		}
		opts = append(opts, sec...)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(stderr, "kreassign:", err)
		return exitUsage
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	t := &tool{o: o, cl: cl, adm: kadm.NewClient(cl), out: stdout}
	var code int
	switch o.action {
	case actGenerate, actDrain:
		code, err = t.generate(ctx)
	case actExecute:
		code, err = t.execute(ctx)
	case actVerify:
		code, err = t.verify(ctx)
	case actCancel:
		code, err = t.cancel(ctx)
	case actList:
		code, err = t.list(ctx)
	}
	if err != nil {
		fmt.Fprintln(stderr, "kreassign:", err)
	}
	return code
}
