package main

import (
	"fmt"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// deadLetter: a message negatively acknowledged until its redelivery count reaches
// MaxDeliveries goes to the dead letter topic (default name TOPIC-SUB-DLQ) and is acknowledged
// on the original subscription.
func deadLetter(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	dlqTopic := t + "-s-DLQ"
	dlq, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: dlqTopic, SubscriptionName: "d",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		return "", err
	}
	defer dlq.Close()
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Shared,
		NackRedeliveryDelay: time.Second, DLQ: &pulsar.DLQPolicy{MaxDeliveries: 2, DeadLetterTopic: dlqTopic}})
	if err != nil {
		return "", err
	}
	defer c.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, DisableBatching: true})
	if err != nil {
		return "", err
	}
	defer p.Close()
	if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte("poison"), Key: "k",
		Properties: map[string]string{"a": "1"}}); err != nil {
		return "", err
	}
	var counts []uint32
	for i := 0; i < 2; i++ {
		m, err := receive(c, patience)
		if err != nil {
			return "", err
		}
		counts = append(counts, m.RedeliveryCount())
		c.Nack(m)
	}
	dead, err := receive(dlq, patience)
	if err != nil {
		return "", fmt.Errorf("dead letter topic: %w", err)
	}
	if err := expect("dead letter", fmt.Sprint(string(dead.Payload()), " ", dead.Key(), " ", dead.Properties()["a"]),
		"poison k 1"); err != nil {
		return "", err
	}
	if dead.Properties()["REAL_TOPIC"] != t {
		return "", fmt.Errorf("REAL_TOPIC %q", dead.Properties()["REAL_TOPIC"])
	}
	if err := quiet(c); err != nil {
		return "", fmt.Errorf("after dead-lettering: %w", err)
	}
	if err := expect("redelivery counts", counts, []uint32{0, 1}); err != nil {
		return "", err
	}
	return fmt.Sprintf("delivered with counts %v, then to %s", counts, localName(dlqTopic)), nil
}

// retryLetter: ReconsumeLater sends the message to the retry topic (TOPIC-SUB-RETRY) with a
// delay; it comes back with RECONSUMETIMES raised; past MaxDeliveries it goes to the DLQ.
func retryLetter(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	dlq, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: t + "-s-DLQ", SubscriptionName: "d",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		return "", err
	}
	defer dlq.Close()
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Shared,
		RetryEnable: true, DLQ: &pulsar.DLQPolicy{MaxDeliveries: 2}})
	if err != nil {
		return "", err
	}
	defer c.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, DisableBatching: true})
	if err != nil {
		return "", err
	}
	defer p.Close()
	if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte("later")}); err != nil {
		return "", err
	}
	var seen []string
	var last time.Time
	for i := 0; i < 3; i++ {
		m, err := receive(c, patience)
		if err != nil {
			return "", fmt.Errorf("delivery %d: %w", i, err)
		}
		now := time.Now()
		// Pulsar delivers a delayed message once deliverAt - delayedDeliveryTickTimeMillis
		// (1 s by default) has passed: a 2 s delay comes back after 1 s at the earliest.
		if i > 0 && now.Sub(last) < 900*time.Millisecond {
			return "", fmt.Errorf("retry %d came back after %s, before its 2s delay less the 1s tick", i, now.Sub(last))
		}
		last = now
		seen = append(seen, fmt.Sprintf("%s@%s#%s", m.Payload(), localName(m.Topic()), m.Properties()["RECONSUMETIMES"]))
		c.ReconsumeLater(m, 2*time.Second)
	}
	dead, err := receive(dlq, patience)
	if err != nil {
		return "", fmt.Errorf("dead letter topic: %w", err)
	}
	want := []string{
		"later@" + localName(t) + "#",
		"later@" + localName(t) + "-s-RETRY#1",
		"later@" + localName(t) + "-s-RETRY#2",
	}
	if err := expect("deliveries", seen, want); err != nil {
		return "", err
	}
	if err := expect("dead letter", string(dead.Payload())+"#"+dead.Properties()["RECONSUMETIMES"], "later#3"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%v then DLQ", seen), nil
}
