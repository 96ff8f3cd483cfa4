package integration

import (
	"fmt"
	"testing"
	"time"
)

// clusterAgreeWithin is how long after a change every broker's Metadata
// may still disagree (brokers, controller, partition leaders).
const clusterAgreeWithin = time.Second

// TestClusterMetadataAgreement: after a change every broker's Metadata
// agrees within clusterAgreeWithin. Measured from the change's
// acknowledgement: for a created topic from the CreateTopics response; for
// a broker that was killed, returned, or was the controller, from the
// first moment any broker's Metadata shows the change (the controller
// noticed it) to the moment all agree.
func TestClusterMetadataAgreement(t *testing.T) {
	c := startCluster(t, clusterOpts{brokers: 3})
	v0 := c.waitAgreed(t, clusterSettle, nil)

	// A created topic.
	acked := c.createTopicVia(t, 2, "agree", 12, nil)
	agreed := c.pollAgreement(t, clusterSettle, allLed("agree", 12))
	t.Logf("created topic: all brokers agree %v after the CreateTopics response", agreed.Sub(acked).Round(time.Millisecond))
	if d := agreed.Sub(acked); d > clusterAgreeWithin {
		t.Errorf("brokers agree on the new topic %v after CreateTopics answered, want <= %v", d, clusterAgreeWithin)
	}

	// A killed broker (not the controller), and its return.
	victim := v0.controller%3 + 1
	c.measureChange(t, "broker killed", func() { c.broker(victim).Kill() }, func(v clusterView) error {
		if v.hasBroker(victim) {
			return fmt.Errorf("broker %d still listed", victim)
		}
		return nil
	})
	c.measureChange(t, "broker returned", func() { c.broker(victim).Restart() }, func(v clusterView) error {
		if !v.hasBroker(victim) {
			return fmt.Errorf("broker %d not listed", victim)
		}
		return allLed("agree", 12)(v)
	})

	// A killed controller: a new one is elected and tells everyone.
	old := c.waitAgreed(t, clusterSettle, nil).controller
	c.measureChange(t, "controller killed", func() { c.broker(old).Kill() }, func(v clusterView) error {
		if v.hasBroker(old) || v.controller == old {
			return fmt.Errorf("old controller %d still listed or controller", old)
		}
		return nil
	})
}

// pollAgreement polls every running broker until all report the same view
// that passes check, and returns when that was first seen.
func (c *testCluster) pollAgreement(t *testing.T, within time.Duration, check func(clusterView) error) time.Time {
	t.Helper()
	var at time.Time
	checkFor(t, within, 2*time.Millisecond, func() error {
		if _, err := c.agreedSane(check); err != nil {
			return err
		}
		at = time.Now()
		return nil
	})
	return at
}

// measureChange runs change, then polls every running broker: first until
// any one's view passes done (the change is known), then until all agree
// on such a view, and asserts that the second wait took at most
// clusterAgreeWithin.
func (c *testCluster) measureChange(t *testing.T, what string, change func(), done func(clusterView) error) {
	t.Helper()
	change()
	began := time.Now()
	var first time.Time
	var firstBy int32
	checkFor(t, clusterSession+clusterSessionSlack+clusterSettle, 2*time.Millisecond, func() error {
		vs, err := c.views(time.Second)
		if err != nil {
			return err
		}
		for _, v := range vs {
			if done(v) == nil {
				first, firstBy = time.Now(), v.from
				return nil
			}
		}
		return fmt.Errorf("no broker reflects %q yet (broker %d sees %s)", what, vs[0].from, vs[0].key())
	})
	all := c.pollAgreement(t, clusterSettle, done)
	d := all.Sub(first)
	t.Logf("%s: broker %d showed it %v after the change, all agree %v later", what, firstBy, first.Sub(began).Round(time.Millisecond), d.Round(time.Millisecond))
	if d > clusterAgreeWithin {
		t.Errorf("%s: brokers agree %v after broker %d first showed it, want <= %v", what, d, firstBy, clusterAgreeWithin)
	}
}
