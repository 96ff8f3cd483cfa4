// Command kpartbench is the client side of scripts/bench-partitions.sh: it
// creates a topic of many partitions, writes a few records to each, and
// waits, with a bound, until a cluster state holds over every partition,
// printing how long that took. The script starts, kills and restarts the
// brokers; kpartbench only talks to them (franz-go).
//
//	kpartbench create   --brokers A --topic T --partitions N --rf R
//	kpartbench produce  --brokers A --topic T --partitions N --records K
//	kpartbench serving  --brokers A --topic T --partitions N --records K --since S
//	kpartbench led      --brokers A --topic T --partitions N --not-leader ID --since S
//	kpartbench in-sync  --brokers A --topic T --partitions N --rf R --since S
//	kpartbench shrunk   --brokers A --topic T --partitions N --not-leader ID --since S
//	kpartbench controller --brokers A
//	kpartbench metadata --brokers A --topic T --requests 20
//
// Every command prints one line of key=value figures on stdout. --since is
// a Unix time in seconds (date +%s.%N): the waits report the seconds from
// it (the moment the script killed or started a broker) until the state
// held, so the time to start the client does not hide in the figure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// pollEvery is the pause between two checks of a wait.
const pollEvery = 20 * time.Millisecond

type options struct {
	brokers    string
	topic      string
	partitions int
	rf         int
	records    int
	since      float64
	notLeader  int
	requests   int
	timeout    time.Duration
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kpartbench:", err)
		os.Exit(1)
	}
}

func parse(args []string) (string, options, error) {
	var o options
	if len(args) == 0 {
		return "", o, errors.New("missing command (create, produce, serving, led, in-sync, shrunk, controller, metadata)")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("kpartbench "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.brokers, "brokers", "127.0.0.1:9092", "seed `host:port`")
	fs.StringVar(&o.topic, "topic", "many", "topic `name`")
	fs.IntVar(&o.partitions, "partitions", 10000, "number of partitions")
	fs.IntVar(&o.rf, "rf", 1, "replication factor")
	fs.IntVar(&o.records, "records", 2, "records per partition")
	fs.Float64Var(&o.since, "since", 0, "Unix `seconds` the wait is measured from (default: now)")
	fs.IntVar(&o.notLeader, "not-leader", -1, "broker `id` that must lead no partition (led) and be in no ISR (shrunk)")
	fs.IntVar(&o.requests, "requests", 20, "Metadata requests to time (metadata)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(args[1:]); err != nil {
		return "", o, fmt.Errorf("%s: %w", cmd, err)
	}
	if o.partitions <= 0 || o.rf <= 0 || o.records < 0 || o.requests <= 0 {
		return "", o, errors.New("--partitions, --rf and --requests must be positive, --records not negative")
	}
	if o.since == 0 {
		o.since = float64(time.Now().UnixNano()) / 1e9
	}
	return cmd, o, nil
}

func run(args []string, out io.Writer) error {
	cmd, o, err := parse(args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(o.brokers, ",")...),
		kgo.DefaultProduceTopic(o.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(1<<20),
		kgo.DialTimeout(2*time.Second),
		kgo.RetryTimeout(30*time.Second),
		kgo.MetadataMinAge(10*time.Millisecond),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Creating thousands of partitions takes longer than kadm's default
	// 15 s request timeout; a retry after it would only find the topic
	// there (TOPIC_ALREADY_EXISTS).
	adm.SetTimeoutMillis(int32(min(o.timeout, time.Hour).Milliseconds()))
	start := time.Unix(0, int64(o.since*1e9))

	switch cmd {
	case "create":
		t0 := time.Now()
		if _, err := adm.CreateTopic(ctx, int32(o.partitions), int16(o.rf), nil, o.topic); err != nil {
			return fmt.Errorf("create %s: %w", o.topic, err)
		}
		acked := time.Since(t0)
		if err := waitFor(ctx, func(ctx context.Context) (int, error) { return unledPartitions(ctx, adm, o, -1) }); err != nil {
			return err
		}
		fmt.Fprintf(out, "create_acked_s=%.3f create_all_led_s=%.3f\n", acked.Seconds(), time.Since(t0).Seconds())
	case "produce":
		t0 := time.Now()
		recs := make([]*kgo.Record, 0, o.partitions*o.records)
		for p := range o.partitions {
			for i := range o.records {
				recs = append(recs, &kgo.Record{Partition: int32(p), Value: []byte("record " + strconv.Itoa(i))})
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		fmt.Fprintf(out, "produce_s=%.3f records=%d\n", time.Since(t0).Seconds(), len(recs))
	case "serving":
		// Partitions serve as their logs open: the first and the half
		// come before the last. Asked of each leader directly, without
		// the client's retries and their backoff, which would hide when
		// a partition started to answer.
		first, half, err := waitServing(ctx, cl, adm, o, start)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "first_serving_s=%.3f half_serving_s=%.3f serving_s=%.3f\n", first.Seconds(), half.Seconds(), time.Since(start).Seconds())
	case "led":
		if err := waitFor(ctx, func(ctx context.Context) (int, error) { return unledPartitions(ctx, adm, o, int32(o.notLeader)) }); err != nil {
			return err
		}
		fmt.Fprintf(out, "led_s=%.3f\n", time.Since(start).Seconds())
	case "in-sync":
		if err := waitFor(ctx, func(ctx context.Context) (int, error) { return underReplicated(ctx, adm, o) }); err != nil {
			return err
		}
		fmt.Fprintf(out, "in_sync_s=%.3f\n", time.Since(start).Seconds())
	case "shrunk":
		if err := waitFor(ctx, func(ctx context.Context) (int, error) { return inISR(ctx, adm, o) }); err != nil {
			return err
		}
		fmt.Fprintf(out, "shrunk_s=%.3f\n", time.Since(start).Seconds())
	case "controller":
		var id int32 = -1
		err := waitFor(ctx, func(ctx context.Context) (int, error) {
			md, err := adm.BrokerMetadata(ctx)
			if err != nil {
				return 1, err
			}
			id = md.Controller
			if id < 0 {
				return 1, nil
			}
			return 0, nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "controller=%d\n", id)
	case "metadata":
		var lat []time.Duration
		for range o.requests {
			t0 := time.Now()
			md, err := adm.Metadata(ctx, o.topic)
			if err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
			lat = append(lat, time.Since(t0))
			if n := len(md.Topics[o.topic].Partitions); n != o.partitions {
				return fmt.Errorf("metadata: %d partitions of %s, want %d", n, o.topic, o.partitions)
			}
		}
		slices.Sort(lat)
		fmt.Fprintf(out, "metadata_p50_ms=%.1f metadata_max_ms=%.1f\n",
			float64(lat[len(lat)/2].Microseconds())/1e3, float64(lat[len(lat)-1].Microseconds())/1e3)
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}

// waitFor calls check every pollEvery until it reports nothing missing, or
// ctx ends (then the last count and error say why).
func waitFor(ctx context.Context, check func(context.Context) (int, error)) error {
	var missing int
	var err error
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		missing, err = check(cctx)
		cancel()
		if err == nil && missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up with %d partitions missing (last error: %v): %w", missing, err, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// waitServing waits until every partition of o.topic answers ListOffsets
// (latest) with at least o.records records, asking each partition's
// leader directly (no client retries), every pollEvery, only for the
// partitions still missing. It returns the times from start until the
// first partition and half of them answered.
func waitServing(ctx context.Context, cl *kgo.Client, adm *kadm.Client, o options, start time.Time) (first, half time.Duration, err error) {
	served := map[int32]bool{}
	var leaders map[int32]int32 // partition -> leader, from Metadata
	for len(served) < o.partitions {
		if leaders == nil {
			md, err := adm.Metadata(ctx, o.topic)
			if err == nil {
				leaders = map[int32]int32{}
				for _, p := range md.Topics[o.topic].Partitions {
					leaders[p.Partition] = p.Leader
				}
			}
		}
		stale := false
		for leader, parts := range pendingByLeader(leaders, served, o.partitions) {
			req := kmsg.NewPtrListOffsetsRequest()
			req.ReplicaID = -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = o.topic
			for _, p := range parts {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := cl.Broker(int(leader)).Request(rctx, req)
			cancel()
			if err != nil {
				stale = true
				continue
			}
			for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
				for _, p := range t.Partitions {
					switch {
					case p.ErrorCode == 0 && p.Offset >= int64(o.records):
						served[p.Partition] = true
					case p.ErrorCode == kerr.NotLeaderForPartition.Code || p.ErrorCode == kerr.UnknownTopicOrPartition.Code:
						stale = true // or not open yet: ask Metadata again
					}
				}
			}
		}
		if stale {
			leaders = nil
		}
		if len(served) > 0 && first == 0 {
			first = time.Since(start)
		}
		if len(served) >= (o.partitions+1)/2 && half == 0 {
			half = time.Since(start)
		}
		if len(served) == o.partitions {
			break
		}
		select {
		case <-ctx.Done():
			return first, half, fmt.Errorf("gave up with %d of %d partitions serving: %w", len(served), o.partitions, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
	return first, half, nil
}

// pendingByLeader groups partitions 0..n-1 not yet served by their leader
// (leaders from Metadata; a partition without a known leader waits).
func pendingByLeader(leaders map[int32]int32, served map[int32]bool, n int) map[int32][]int32 {
	out := map[int32][]int32{}
	for p := range int32(n) {
		if served[p] {
			continue
		}
		if l, ok := leaders[p]; ok && l >= 0 {
			out[l] = append(out[l], p)
		}
	}
	return out
}

func unledPartitions(ctx context.Context, adm *kadm.Client, o options, notLeader int32) (int, error) {
	md, err := adm.Metadata(ctx, o.topic)
	if err != nil {
		return o.partitions, err
	}
	return countUnled(md.Topics[o.topic].Partitions, md.Brokers.NodeIDs(), o.partitions, notLeader), nil
}

// countUnled is how many of partitions 0..n-1 lack a leader that is a live
// broker other than notLeader.
func countUnled(parts kadm.PartitionDetails, live []int32, n int, notLeader int32) int {
	missing := 0
	for p := range int32(n) {
		d, ok := parts[p]
		if !ok || d.Err != nil || d.Leader < 0 || d.Leader == notLeader || !slices.Contains(live, d.Leader) {
			missing++
		}
	}
	return missing
}

func underReplicated(ctx context.Context, adm *kadm.Client, o options) (int, error) {
	md, err := adm.Metadata(ctx, o.topic)
	if err != nil {
		return o.partitions, err
	}
	return countUnderReplicated(md.Topics[o.topic].Partitions, o.partitions, o.rf), nil
}

// countUnderReplicated is how many of partitions 0..n-1 are missing, have
// no leader, or have fewer than rf replicas in their ISR.
func countUnderReplicated(parts kadm.PartitionDetails, n, rf int) int {
	missing := 0
	for p := range int32(n) {
		d, ok := parts[p]
		if !ok || d.Err != nil || d.Leader < 0 || len(d.ISR) < rf {
			missing++
		}
	}
	return missing
}

func inISR(ctx context.Context, adm *kadm.Client, o options) (int, error) {
	md, err := adm.Metadata(ctx, o.topic)
	if err != nil {
		return o.partitions, err
	}
	return countInISR(md.Topics[o.topic].Partitions, o.partitions, int32(o.notLeader)), nil
}

// countInISR is how many of partitions 0..n-1 are missing or still have
// broker id in their ISR.
func countInISR(parts kadm.PartitionDetails, n int, id int32) int {
	missing := 0
	for p := range int32(n) {
		d, ok := parts[p]
		if !ok || d.Err != nil || slices.Contains(d.ISR, id) {
			missing++
		}
	}
	return missing
}
