package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// chunking: a payload ten times the chunk size arrives whole, under one message id.
func chunking(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s"})
	if err != nil {
		return "", err
	}
	defer c.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, DisableBatching: true,
		EnableChunking: true, ChunkMaxMessageSize: 1000})
	if err != nil {
		return "", err
	}
	defer p.Close()
	big := bytes.Repeat([]byte("0123456789"), 1000)
	id, err := send(p, &pulsar.ProducerMessage{Payload: big, Properties: map[string]string{"p": "v"}})
	if err != nil {
		return "", err
	}
	small, err := send(p, &pulsar.ProducerMessage{Payload: []byte("after")})
	if err != nil {
		return "", err
	}
	m, err := receive(c, patience)
	if err != nil {
		return "", err
	}
	if !bytes.Equal(m.Payload(), big) || m.Properties()["p"] != "v" {
		return "", fmt.Errorf("got %d bytes, properties %v", len(m.Payload()), m.Properties())
	}
	if err := c.Ack(m); err != nil {
		return "", err
	}
	m2, err := receive(c, patience)
	if err != nil {
		return "", err
	}
	if string(m2.Payload()) != "after" {
		return "", fmt.Errorf("next message %q", m2.Payload())
	}
	// The chunks are the topic's first entries; the next message follows them.
	if small.EntryID() < 10 {
		return "", fmt.Errorf("entry ids %v then %v: fewer than 10 chunks", id, small)
	}
	return fmt.Sprintf("10000 bytes in %d chunks, id %v", small.EntryID(), id), nil
}

// delayedDelivery: a message sent with DeliverAfter 2s reaches a Shared consumer after the
// messages sent after it, not before its time.
func delayedDelivery(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		return "", err
	}
	defer c.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, DisableBatching: true})
	if err != nil {
		return "", err
	}
	defer p.Close()
	sent := time.Now()
	if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte("late"), DeliverAfter: 2 * time.Second}); err != nil {
		return "", err
	}
	if _, err := send(p, &pulsar.ProducerMessage{Payload: []byte("now")}); err != nil {
		return "", err
	}
	first, err := receive(c, patience)
	if err != nil {
		return "", err
	}
	second, err := receive(c, patience)
	if err != nil {
		return "", err
	}
	after := time.Since(sent)
	if err := expect("order", []string{string(first.Payload()), string(second.Payload())}, []string{"now", "late"}); err != nil {
		return "", err
	}
	// Not before deliverAt less the broker's tick (delayedDeliveryTickTimeMillis, 1 s).
	if after < 900*time.Millisecond {
		return "", fmt.Errorf("delayed message delivered %s after sending", after)
	}
	return fmt.Sprintf("the delayed message arrived %s after sending", after.Round(time.Millisecond)), nil
}

// readerSeek: a reader reads from the earliest; a new reader seeks to a message id, another to
// a publish time, another to the start (time 0); readers started at a message id, exclusive
// and inclusive. (A reader that seeks again while messages are in flight may still hand out a
// message read before the seek: each seek here has a reader of its own.)
func readerSeek(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, DisableBatching: true})
	if err != nil {
		return "", err
	}
	defer p.Close()
	want := names("m", 10)
	if _, err := sendAll(p, want); err != nil {
		return "", err
	}
	var ids []pulsar.MessageID // as a reader received them: the Go reader seeks only to those
	var times []time.Time
	next := func(r pulsar.Reader) (pulsar.Message, error) {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		return r.Next(ctx)
	}
	r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: t, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		return "", err
	}
	var all []string
	for len(all) < 10 {
		m, err := next(r)
		if err != nil {
			r.Close()
			return "", fmt.Errorf("from earliest, after %d: %w", len(all), err)
		}
		all = append(all, string(m.Payload()))
		ids = append(ids, m.ID())
		times = append(times, m.PublishTime())
	}
	hasNext := r.HasNext()
	r.Close()
	if err := expect("from earliest", all, want); err != nil {
		return "", err
	}
	if hasNext {
		return "", fmt.Errorf("HasNext at the end")
	}
	seekThenRead := func(what string, seek func(pulsar.Reader) error) (string, error) {
		r, err := cl.CreateReader(pulsar.ReaderOptions{Topic: t, StartMessageID: pulsar.LatestMessageID()})
		if err != nil {
			return "", err
		}
		defer r.Close()
		if err := seek(r); err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		m, err := next(r)
		if err != nil {
			return "", fmt.Errorf("after %s: %w", what, err)
		}
		return string(m.Payload()), nil
	}
	var steps []string
	// Seeking by time serves the first message published at or after it: m-7, or an earlier
	// message sent in the same millisecond (publish times are in ms; a fast send shares them).
	firstAt7 := 7
	for firstAt7 > 0 && times[firstAt7-1].UnixMilli() == times[7].UnixMilli() {
		firstAt7--
	}
	for _, c := range []struct {
		what, says, want string
		seek             func(pulsar.Reader) error
	}{
		// The Go reader (start not inclusive) hands out what follows the id it sought to.
		{"seek to m-4's id", "m-5", "m-5", func(r pulsar.Reader) error { return r.Seek(ids[4]) }},
		{"seek to m-7's publish time", "the first message of m-7's millisecond", want[firstAt7], func(r pulsar.Reader) error { return r.SeekByTime(times[7]) }},
		{"seek to time 0", "m-0", "m-0", func(r pulsar.Reader) error { return r.SeekByTime(time.Unix(0, 0)) }},
	} {
		got, err := seekThenRead(c.what, c.seek)
		if err != nil {
			return "", err
		}
		// The step names what the rule serves, so runs that differ only in timing compare equal.
		steps = append(steps, c.what+" -> "+c.says)
		if got != c.want {
			return "", fmt.Errorf("%s: got %s, want %s", c.what, got, c.want)
		}
	}
	for _, inclusive := range []bool{false, true} {
		r2, err := cl.CreateReader(pulsar.ReaderOptions{Topic: t, StartMessageID: ids[2],
			StartMessageIDInclusive: inclusive})
		if err != nil {
			return "", err
		}
		m, err := next(r2)
		r2.Close()
		if err != nil {
			return "", err
		}
		wantFirst := map[bool]string{false: "m-3", true: "m-2"}[inclusive]
		if err := expect(fmt.Sprintf("reader from m-2's id, inclusive=%v", inclusive), string(m.Payload()), wantFirst); err != nil {
			return "", err
		}
	}
	return strings.Join(steps, "; ") + "; start at m-2's id: m-3 exclusive, m-2 inclusive", nil
}

// regexNewTopics: a pattern subscription picks up a topic created after it subscribed.
func regexNewTopics(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	old := e.topic("-old")
	p0, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: old})
	if err != nil {
		return "", err
	}
	defer p0.Close()
	pattern := "persistent://public/default/" + e.prefix + "-" + e.name + "-.*"
	c, err := cl.Subscribe(pulsar.ConsumerOptions{TopicsPattern: pattern, SubscriptionName: "s",
		AutoDiscoveryPeriod: time.Second, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := send(p0, &pulsar.ProducerMessage{Payload: []byte("on old")}); err != nil {
		return "", err
	}
	m, err := receive(c, patience)
	if err != nil {
		return "", fmt.Errorf("existing topic: %w", err)
	}
	if string(m.Payload()) != "on old" {
		return "", fmt.Errorf("got %q", m.Payload())
	}
	newer := e.topic("-new")
	p1, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: newer})
	if err != nil {
		return "", err
	}
	defer p1.Close()
	// Until the consumer discovers the topic a message sent there waits in the subscription it
	// will make from the earliest position; keep sending until one arrives, within patience.
	deadline := time.Now().Add(patience)
	if _, err := send(p1, &pulsar.ProducerMessage{Payload: []byte("on new")}); err != nil {
		return "", err
	}
	for {
		m, err := receive(c, 500*time.Millisecond)
		if err == nil {
			if m.Topic() != newer || string(m.Payload()) != "on new" {
				return "", fmt.Errorf("got %q from %s", m.Payload(), m.Topic())
			}
			return "saw the topic made after subscribing", nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the new topic's message did not arrive within %s", patience)
		}
	}
}

// accessModes: an Exclusive producer keeps others out (Shared and Exclusive are refused at
// once); a WaitForExclusive producer gets the topic when the exclusive one closes.
func accessModes(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	ex, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, Name: "ex",
		ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	if err != nil {
		return "", err
	}
	var refusals []string
	// Real Pulsar: a Shared producer gets ProducerBusy, an Exclusive one ProducerFenced.
	for mode, kind := range map[pulsar.ProducerAccessMode]string{
		pulsar.ProducerAccessModeShared: "ProducerBusy", pulsar.ProducerAccessModeExclusive: "ProducerFenced"} {
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, ProducerAccessMode: mode})
		if err == nil {
			p.Close()
			return "", fmt.Errorf("a producer in mode %d was accepted beside the exclusive one", mode)
		}
		if !strings.Contains(err.Error(), kind) {
			return "", fmt.Errorf("producer in mode %d: %v, not %s", mode, err, kind)
		}
		refusals = append(refusals, kind)
	}
	type made struct {
		p   pulsar.Producer
		err error
	}
	waiting := make(chan made, 1)
	go func() {
		p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, Name: "waiter",
			ProducerAccessMode: pulsar.ProducerAccessModeWaitForExclusive})
		waiting <- made{p, err}
	}()
	select {
	case w := <-waiting:
		if w.p != nil {
			w.p.Close()
		}
		return "", fmt.Errorf("WaitForExclusive did not wait: %v", w.err)
	case <-time.After(quietFor):
	}
	ex.Close()
	select {
	case w := <-waiting:
		if w.err != nil {
			return "", fmt.Errorf("WaitForExclusive after the exclusive producer closed: %w", w.err)
		}
		defer w.p.Close()
		if _, err := send(w.p, &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
			return "", err
		}
	case <-time.After(patience):
		return "", fmt.Errorf("WaitForExclusive still waiting %s after the exclusive producer closed", patience)
	}
	return "refused: " + strings.Join(refusals, ", ") + "; the waiter took over", nil
}

// authRefused: a client whose token the broker refuses does not get a producer, and reports
// the broker's reason. The Go client takes the refused CONNECT for a connection failure: it
// retries until the operation timeout, and logs the broker's message each time.
func authRefused(e *env) (string, error) {
	if e.authServiceURL == "" {
		return "", fmt.Errorf("no -auth-service-url given")
	}
	// A well-formed HS256 token signed with a key the broker does not know.
	bad := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.sM0F9ppJSoVgvLTRAJtHZNMD0JpGhmVN8vPzgy9bLkk"
	var logged syncBuffer
	logger := plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})))
	cl, err := pulsar.NewClient(pulsar.ClientOptions{URL: e.authServiceURL, OperationTimeout: 5 * time.Second,
		ConnectionTimeout: 5 * time.Second, Authentication: pulsar.NewAuthenticationToken(bad), Logger: logger})
	if err != nil {
		return "", err
	}
	defer cl.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: e.topic("")})
	if err == nil {
		p.Close()
		return "", fmt.Errorf("a producer was created with a refused token")
	}
	const reason = "Failed to establish connection with broker: 'Failed to authenticate'"
	if !strings.Contains(logged.String(), reason) {
		return "", fmt.Errorf("the client did not log %q; it logged:\n%s", reason, logged.String())
	}
	return fmt.Sprintf("no producer (%s); logged %q", strings.ReplaceAll(err.Error(), "\n", " "), reason), nil
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
