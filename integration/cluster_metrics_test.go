package integration

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scrapes of a replicated cluster's /metrics endpoints.

// scrape reads broker id's /metrics into "name{k=v,...}" -> value, with
// labels in name order. Only a replicated cluster's brokers have one.
func (c *testCluster) scrape(id int32) (map[string]float64, error) {
	if !c.opts.replicated {
		return nil, fmt.Errorf("broker %d has no /metrics endpoint (the cluster is not replicated)", id)
	}
	return scrapeMetrics(c.metrics[id-1])
}

// scrapeMetrics reads a broker's /metrics at addr (kbroker.metrics.address)
// into sample name (labels included, quotes removed) -> value.
func scrapeMetrics(addr string) (map[string]float64, error) {
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics of %s: %s", addr, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[strings.ReplaceAll(line[:i], `"`, "")] = v
	}
	return out, sc.Err()
}

// metricKey names a series as scrape keys it: labels given as k, v pairs
// in label-name order (partition, replica, topic).
func metricKey(name string, kv ...string) string {
	if len(kv) == 0 {
		return name
	}
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, kv[i]+"="+kv[i+1])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// metric returns one series of broker id; missing series are an error.
func (c *testCluster) metric(id int32, name string, kv ...string) (float64, error) {
	m, err := c.scrape(id)
	if err != nil {
		return 0, err
	}
	key := metricKey(name, kv...)
	v, ok := m[key]
	if !ok {
		return 0, fmt.Errorf("broker %d exposes no %s", id, key)
	}
	return v, nil
}

func (c *testCluster) mustMetric(id int32, name string, kv ...string) float64 {
	c.t.Helper()
	v, err := c.metric(id, name, kv...)
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// partitionOffsets returns broker id's high watermark and log end offset
// of topic-p from its metrics.
func (c *testCluster) partitionOffsets(id int32, topic string, p int32) (hw, leo int64, err error) {
	m, err := c.scrape(id)
	if err != nil {
		return 0, 0, err
	}
	ps := strconv.Itoa(int(p))
	h, ok1 := m[metricKey("kbroker_partition_high_watermark", "partition", ps, "topic", topic)]
	l, ok2 := m[metricKey("kbroker_partition_log_end_offset", "partition", ps, "topic", topic)]
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("broker %d exposes no offsets of %s-%d", id, topic, p)
	}
	return int64(h), int64(l), nil
}

// waitInSyncEverywhere waits until every running replica of topic-p (a
// broker it is assigned to) has its high watermark at its log end and the
// same log end as the others (the partition is quiet and fully
// replicated), and returns that offset.
func (c *testCluster) waitInSyncEverywhere(within time.Duration, topic string, p int32) int64 {
	c.t.Helper()
	var end int64
	replicas := c.replicasOf(topic, p)
	checkFor(c.t, within, 50*time.Millisecond, func() error {
		first := true
		for i, b := range c.brokers {
			if !b.Running() || !slices.Contains(replicas, int32(i+1)) {
				continue
			}
			hw, leo, err := c.partitionOffsets(int32(i+1), topic, p)
			if err != nil {
				return err
			}
			if hw != leo {
				return fmt.Errorf("broker %d: %s-%d high watermark %d, log end %d", i+1, topic, p, hw, leo)
			}
			if first {
				end, first = leo, false
			} else if leo != end {
				return fmt.Errorf("broker %d: %s-%d log end %d, another replica %d", i+1, topic, p, leo, end)
			}
		}
		return nil
	})
	return end
}
