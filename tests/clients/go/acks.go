package main

import (
	"fmt"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// ackIndividual: acks by message with receipts on; after the consumer leaves, only what was
// not acknowledged comes back.
func ackIndividual(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	opts := pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Shared, AckWithResponse: true}
	c, err := cl.Subscribe(opts)
	if err != nil {
		return "", err
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, DisableBatching: true})
	if err != nil {
		return "", err
	}
	defer p.Close()
	want := names("m", 5)
	if _, err := sendAll(p, want); err != nil {
		return "", err
	}
	got, err := receiveN(c, 5)
	if err != nil {
		return "", err
	}
	for _, i := range []int{1, 3} {
		// With AckWithResponse the call returns the broker's answer.
		if err := c.Ack(got[i]); err != nil {
			return "", fmt.Errorf("ack receipt: %w", err)
		}
	}
	c.Close()
	c, err = cl.Subscribe(opts)
	if err != nil {
		return "", err
	}
	defer c.Close()
	again, err := receiveN(c, 3)
	if err != nil {
		return "", err
	}
	for _, m := range again {
		if err := c.Ack(m); err != nil {
			return "", err
		}
	}
	if err := quiet(c); err != nil {
		return "", err
	}
	return "acked 2 of 5 with receipts; the 3 others came back", expect("redelivered", sorted(payloads(again)),
		[]string{"m-0", "m-2", "m-4"})
}

// ackCumulative: one cumulative ack covers every earlier message.
func ackCumulative(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	opts := pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Exclusive, AckWithResponse: true}
	c, err := cl.Subscribe(opts)
	if err != nil {
		return "", err
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, DisableBatching: true})
	if err != nil {
		return "", err
	}
	defer p.Close()
	if _, err := sendAll(p, names("m", 5)); err != nil {
		return "", err
	}
	got, err := receiveN(c, 5)
	if err != nil {
		return "", err
	}
	if err := c.AckCumulative(got[2]); err != nil {
		return "", fmt.Errorf("cumulative ack receipt: %w", err)
	}
	c.Close()
	c, err = cl.Subscribe(opts)
	if err != nil {
		return "", err
	}
	defer c.Close()
	again, err := receiveN(c, 2)
	if err != nil {
		return "", err
	}
	if err := quiet(c); err != nil {
		return "", err
	}
	var backlog struct {
		Subscriptions map[string]struct {
			MsgBacklog int `json:"msgBacklog"`
		} `json:"subscriptions"`
	}
	if err := adminGet(e, "/admin/v2/persistent/public/default/"+localName(t)+"/stats", &backlog); err != nil {
		return "", err
	}
	if err := expect("msgBacklog", backlog.Subscriptions["s"].MsgBacklog, 2); err != nil {
		return "", err
	}
	return "cumulative ack of the 3rd left 2, backlog 2", expect("redelivered", payloads(again), []string{"m-3", "m-4"})
}

// ackBatchIndex: single messages of one batch acknowledged one by one (batch index acks, with
// receipts); the batch comes back with only the others.
func ackBatchIndex(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	opts := pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Shared,
		AckWithResponse: true, EnableBatchIndexAcknowledgment: true}
	c, err := cl.Subscribe(opts)
	if err != nil {
		return "", err
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, BatchingMaxMessages: 100,
		BatchingMaxPublishDelay: time.Hour})
	if err != nil {
		return "", err
	}
	defer p.Close()
	var msgs []*pulsar.ProducerMessage
	for _, b := range names("m", 5) {
		msgs = append(msgs, &pulsar.ProducerMessage{Payload: []byte(b)})
	}
	ids, err := sendBatch(p, msgs)
	if err != nil {
		return "", err
	}
	if ids[0].EntryID() != ids[4].EntryID() || ids[4].BatchIdx() != 4 {
		return "", fmt.Errorf("not one batch: %v .. %v", ids[0], ids[4])
	}
	got, err := receiveN(c, 5)
	if err != nil {
		return "", err
	}
	for _, i := range []int{0, 2} {
		if err := c.Ack(got[i]); err != nil {
			return "", fmt.Errorf("batch index ack receipt: %w", err)
		}
	}
	c.Close()
	c, err = cl.Subscribe(opts)
	if err != nil {
		return "", err
	}
	defer c.Close()
	again, err := receiveN(c, 3)
	if err != nil {
		return "", err
	}
	if err := quiet(c); err != nil {
		return "", err
	}
	return "acked indexes 0 and 2 of a batch of 5; 1, 3, 4 came back",
		expect("redelivered", payloads(again), []string{"m-1", "m-3", "m-4"})
}

type doubling struct{ base time.Duration }

func (d doubling) Next(redeliveryCount uint32) time.Duration { return d.base << redeliveryCount }

// nackBackoff: a negatively acknowledged message comes back after the backoff for its
// redelivery count (1 s, then 2 s), with the count raised by the broker each time.
func nackBackoff(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Shared,
		NackBackoffPolicy: doubling{time.Second}})
	if err != nil {
		return "", err
	}
	defer c.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, DisableBatching: true})
	if err != nil {
		return "", err
	}
	defer p.Close()
	if _, err := sendAll(p, []string{"x"}); err != nil {
		return "", err
	}
	var counts []uint32
	var gaps []time.Duration
	var last time.Time
	for i := 0; i < 3; i++ {
		m, err := receive(c, patience)
		if err != nil {
			return "", err
		}
		now := time.Now()
		if i > 0 {
			gaps = append(gaps, now.Sub(last))
		}
		counts = append(counts, m.RedeliveryCount())
		last = now
		if i < 2 {
			c.Nack(m)
		} else if err := c.Ack(m); err != nil {
			return "", err
		}
	}
	if err := expect("redelivery counts", counts, []uint32{0, 1, 2}); err != nil {
		return "", err
	}
	// The client holds the message back for the backoff; allow a little clock slack.
	for i, g := range gaps {
		if min := (time.Second << i) - 100*time.Millisecond; g < min {
			return "", fmt.Errorf("redelivery %d after %s, before the backoff %s", i+1, g, time.Second<<i)
		}
	}
	return fmt.Sprintf("counts %v, gaps %v", counts, gaps), nil
}
