package integration

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestClusterSessionExpiry: a broker frozen with SIGSTOP past the session
// timeout loses its registration (ZooKeeper deletes /brokers/ids/<id>) and
// its RF=1 partitions go offline; after SIGCONT it notices the expired
// session, registers again, leads its partitions again and takes produce
// requests, and nothing it held before is lost. Run once for an ordinary
// broker and once for the controller (which must then stay deposed: the
// controller epoch moved on exactly once). Runs under a ZooKeeper chroot.
func TestClusterSessionExpiry(t *testing.T) {
	for _, victimIsController := range []bool{false, true} {
		name := "broker"
		if victimIsController {
			name = "controller"
		}
		t.Run(name, func(t *testing.T) {
			testSessionExpiry(t, victimIsController)
		})
	}
}

func testSessionExpiry(t *testing.T, victimIsController bool) {
	const (
		partitions = 12
		topic      = "frozen"
	)
	c := startCluster(t, clusterOpts{brokers: 3, chroot: "/kbroker/sigstop"})
	c.createTopicVia(t, 1, topic, partitions, nil)
	v0 := c.waitAgreed(t, clusterSettle, allLed(topic, partitions))
	epoch := c.controllerEpoch()
	victim := v0.controller%3 + 1
	if victimIsController {
		victim = v0.controller
	}
	var others []string
	for id := int32(1); id <= 3; id++ {
		if id != victim {
			others = append(others, c.broker(id).Addr())
		}
	}
	produced := produceToPartitions(t, topic, seq(partitions), 20, "before", c.broker(victim).Addr())
	idPath := "/brokers/ids/" + strconv.Itoa(int(victim))

	b := c.broker(victim)
	b.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			b.Signal(syscall.SIGCONT)
		}
	}()
	checkFor(t, clusterSession+clusterSessionSlack+5*time.Second, 20*time.Millisecond, func() error {
		ok, err := c.zkExists(idPath)
		if err != nil || ok {
			return fmt.Errorf("%s still exists (%v)", idPath, err)
		}
		return nil
	})
	t.Logf("%s gone %v after SIGSTOP (session timeout %v)", idPath, time.Since(stopped).Round(time.Millisecond), clusterSession)
	// The survivors drop it and take its partitions offline.
	var down clusterView
	checkFor(t, clusterSettle, 20*time.Millisecond, func() error {
		vs, err := c.viewsOf(others, time.Second)
		if err != nil {
			return err
		}
		for _, v := range vs {
			if v.hasBroker(victim) || v.controller < 0 || v.controller == victim {
				return fmt.Errorf("broker %d still sees %s", v.from, v.key())
			}
			for p, l := range v0.leaders[topic] {
				if l == victim && v.leaders[topic][p] != -1 {
					return fmt.Errorf("broker %d: partition %d of the frozen broker has leader %d (view %s)", v.from, p, v.leaders[topic][p], v.key())
				}
			}
		}
		down = vs[0]
		return nil
	})
	if victimIsController {
		if got := c.controllerEpoch(); got != epoch+1 {
			t.Errorf("/controller_epoch is %d after the controller's session expired, want %d", got, epoch+1)
		}
	}

	b.Signal(syscall.SIGCONT)
	resumed = true
	cont := time.Now()
	checkFor(t, clusterSession+clusterSessionSlack+10*time.Second, 20*time.Millisecond, func() error {
		ok, err := c.zkExists(idPath)
		if err != nil || !ok {
			return fmt.Errorf("%s does not exist again (%v)", idPath, err)
		}
		return nil
	})
	t.Logf("%s back %v after SIGCONT", idPath, time.Since(cont).Round(time.Millisecond))
	back := c.waitAgreed(t, clusterSettle, allLed(topic, partitions))
	t.Logf("broker %d serves again %v after SIGCONT; controller %d (was %d)", victim, time.Since(cont).Round(time.Millisecond), back.controller, v0.controller)
	if !b.Running() {
		t.Fatalf("broker %d exited after SIGCONT", victim)
	}
	if victimIsController {
		if back.controller == victim || back.controller != down.controller {
			t.Errorf("controller %d after the frozen controller returned, want %d (the one elected meanwhile)", back.controller, down.controller)
		}
	}
	if got := c.controllerEpoch(); victimIsController && got != epoch+1 || !victimIsController && got != epoch {
		t.Errorf("/controller_epoch is %d at the end, started at %d", got, epoch)
	}
	for p, l := range v0.leaders[topic] {
		if back.leaders[topic][p] != l {
			t.Errorf("partition %d led by %d after the return, want %d (its only replica)", p, back.leaders[topic][p], l)
		}
	}
	mine := partitionsLedBy(back, topic, victim)
	if len(mine) == 0 {
		t.Fatalf("broker %d leads none of %s", victim, topic)
	}
	// Produce to its partitions through the returned broker alone.
	produced = append(produced, produceToPartitions(t, topic, mine, 20, "after", c.broker(victim).Addr())...)
	consumeAndCompare(t, c.broker(victim).Addr(), topic, produced)
	// The other brokers kept their sessions.
	for id := int32(1); id <= 3; id++ {
		if id != victim && logContains(c.broker(id), "ZooKeeper session expired") {
			t.Errorf("broker %d lost its ZooKeeper session too", id)
		}
	}
	if !logContains(b, "re-registered") {
		t.Errorf("broker %d's log does not report re-registering", victim)
	}
}

// viewsOf asks the brokers at addrs (a subset of c's) for their views.
func (c *testCluster) viewsOf(addrs []string, timeout time.Duration) ([]clusterView, error) {
	var out []clusterView
	for i, b := range c.brokers {
		for _, a := range addrs {
			if b.Addr() != a {
				continue
			}
			m, err := c.metadataFrom(int32(i+1), timeout)
			if err != nil {
				return nil, err
			}
			out = append(out, viewOf(int32(i+1), m))
		}
	}
	return out, nil
}
