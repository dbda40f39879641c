package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/spaolacci/murmur3"
)

// exclusive: one consumer gets everything; a second on the subscription is refused.
func exclusive(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	c1, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Exclusive})
	if err != nil {
		return "", err
	}
	defer c1.Close()
	c2, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Exclusive})
	if err == nil {
		c2.Close()
		return "", fmt.Errorf("a second exclusive consumer was accepted")
	}
	if !strings.Contains(err.Error(), "ConsumerBusy") {
		return "", fmt.Errorf("second exclusive consumer: %v, not ConsumerBusy", err)
	}
	if c3, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Shared}); err == nil {
		c3.Close()
		return "", fmt.Errorf("a shared consumer joined an exclusive subscription")
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t})
	if err != nil {
		return "", err
	}
	defer p.Close()
	want := names("m", 5)
	if _, err := sendAll(p, want); err != nil {
		return "", err
	}
	got, err := receiveN(c1, 5)
	if err != nil {
		return "", err
	}
	return "second consumer refused; 5 in order", expect("payloads", payloads(got), want)
}

// failover: the active consumer gets everything; when it leaves, the other gets what was not
// acknowledged.
func failover(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	opts := func(name string) pulsar.ConsumerOptions {
		return pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Failover, Name: name}
	}
	a, err := cl.Subscribe(opts("a"))
	if err != nil {
		return "", err
	}
	b, err := cl.Subscribe(opts("b"))
	if err != nil {
		return "", err
	}
	defer b.Close()
	defer a.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t})
	if err != nil {
		return "", err
	}
	defer p.Close()
	want := names("m", 6)
	if _, err := sendAll(p, want); err != nil {
		return "", err
	}
	// Which one the broker makes active is its choice; the first message tells.
	active, standby := a, b
	first, err := receiveEither(a, b)
	if err != nil {
		return "", err
	}
	if first.Consumer != a {
		active, standby = b, a
	}
	got := []pulsar.Message{first.Message}
	more, err := receiveN(active, 2)
	if err != nil {
		return "", err
	}
	got = append(got, more...)
	for _, m := range got {
		if err := active.Ack(m); err != nil {
			return "", err
		}
	}
	if err := quiet(standby); err != nil {
		return "", fmt.Errorf("standby consumer: %w", err)
	}
	active.Close()
	rest, err := receiveN(standby, 3)
	if err != nil {
		return "", fmt.Errorf("after the active consumer closed: %w", err)
	}
	all := append(payloads(got), payloads(rest)...)
	return fmt.Sprintf("%s took 3, %s the other 3 after it closed", active.Name(), standby.Name()),
		expect("payloads", all, want)
}

// shared: two consumers split the messages, each message to one of them.
func shared(e *env) (string, error) {
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	t := e.topic("")
	var cs []pulsar.Consumer
	for _, n := range []string{"a", "b"} {
		c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.Shared,
			Name: n, ReceiverQueueSize: 5})
		if err != nil {
			return "", err
		}
		defer c.Close()
		cs = append(cs, c)
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, DisableBatching: true})
	if err != nil {
		return "", err
	}
	defer p.Close()
	want := names("m", 20)
	if _, err := sendAll(p, want); err != nil {
		return "", err
	}
	got, err := drain(cs, len(want))
	if err != nil {
		return "", err
	}
	var all []string
	for _, ms := range got {
		if len(ms) == 0 {
			return "", fmt.Errorf("a consumer got nothing: %d and %d", len(got[0]), len(got[1]))
		}
		all = append(all, ms...)
	}
	return fmt.Sprintf("split %d/%d", len(got[0]), len(got[1])), expect("payloads", sorted(all), sorted(want))
}

// receiveEither waits for the first message of either consumer.
func receiveEither(a, b pulsar.Consumer) (pulsar.ConsumerMessage, error) {
	select {
	case m := <-a.Chan():
		return m, nil
	case m := <-b.Chan():
		return m, nil
	case <-time.After(patience):
		return pulsar.ConsumerMessage{}, fmt.Errorf("neither consumer received within %s", patience)
	}
}

// drain receives from all consumers at once until total messages arrived, acking each.
func drain(cs []pulsar.Consumer, total int) ([][]string, error) {
	var mu sync.Mutex
	got := make([][]string, len(cs))
	count := 0
	doneAll := make(chan struct{})
	var once sync.Once
	deadline := time.Now().Add(2 * patience)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func(i int, c pulsar.Consumer) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				select {
				case <-doneAll:
					return
				default:
				}
				m, err := receive(c, 200*time.Millisecond)
				if err != nil {
					continue
				}
				_ = c.Ack(m)
				mu.Lock()
				got[i] = append(got[i], string(m.Payload()))
				count++
				if count >= total {
					once.Do(func() { close(doneAll) })
				}
				mu.Unlock()
			}
		}(i, c)
	}
	wg.Wait()
	if count < total {
		return got, fmt.Errorf("received %d of %d", count, total)
	}
	return got, nil
}

func keyedRun(e *env, policy *pulsar.KeySharedPolicy, keys []string) ([]map[string]bool, []pulsar.Consumer, pulsar.Client, error) {
	cl, err := e.client()
	if err != nil {
		return nil, nil, nil, err
	}
	t := e.topic("")
	var cs []pulsar.Consumer
	for i, n := range []string{"a", "b"} {
		o := pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Type: pulsar.KeyShared, Name: n}
		if policy != nil {
			half := 65536 / 2
			pol, _ := pulsar.NewKeySharedPolicySticky([]int{i * half, i*half + half - 1})
			o.KeySharedPolicy = pol
		}
		c, err := cl.Subscribe(o)
		if err != nil {
			cl.Close()
			return nil, nil, nil, err
		}
		cs = append(cs, c)
	}
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, DisableBatching: true})
	if err != nil {
		cl.Close()
		return nil, nil, nil, err
	}
	defer p.Close()
	for round := 0; round < 3; round++ {
		for _, k := range keys {
			if _, err := send(p, &pulsar.ProducerMessage{Key: k, Payload: []byte(fmt.Sprintf("%s/%d", k, round))}); err != nil {
				cl.Close()
				return nil, nil, nil, err
			}
		}
	}
	got, err := drain(cs, 3*len(keys))
	if err != nil {
		cl.Close()
		return nil, nil, nil, err
	}
	keysOf := make([]map[string]bool, len(cs))
	for i, ms := range got {
		keysOf[i] = map[string]bool{}
		for _, m := range ms {
			keysOf[i][strings.SplitN(m, "/", 2)[0]] = true
		}
	}
	for k := range keysOf[0] {
		if keysOf[1][k] {
			cl.Close()
			return nil, nil, nil, fmt.Errorf("key %s went to both consumers", k)
		}
	}
	return keysOf, cs, cl, nil
}

// key_shared: every key goes to one consumer only.
func keyShared(e *env) (string, error) {
	keys := names("k", 20)
	keysOf, _, cl, err := keyedRun(e, nil, keys)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	return fmt.Sprintf("keys split %d/%d, none on both", len(keysOf[0]), len(keysOf[1])), nil
}

// stickyHash is the hash Pulsar's Key_Shared uses: Murmur3 32 of the key, sign bit cleared,
// modulo the range size 65536.
func stickyHash(key string) int {
	return int(murmur3.Sum32([]byte(key))&0x7fffffff) % 65536
}

// key_shared_sticky: consumers with fixed hash ranges get exactly the keys that hash into them;
// a consumer whose range overlaps another's is refused.
func keySharedSticky(e *env) (string, error) {
	keys := names("k", 20)
	keysOf, _, cl, err := keyedRun(e, &pulsar.KeySharedPolicy{}, keys)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	for i, ks := range keysOf {
		for k := range ks {
			if h := stickyHash(k); h/32768 != i {
				return "", fmt.Errorf("key %s (hash %d) went to consumer %d", k, h, i)
			}
		}
	}
	pol, _ := pulsar.NewKeySharedPolicySticky([]int{100, 40000})
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: e.topic(""), SubscriptionName: "s",
		Type: pulsar.KeyShared, Name: "c", KeySharedPolicy: pol})
	if err == nil {
		c.Close()
		return "", fmt.Errorf("a consumer with an overlapping range was accepted")
	}
	return fmt.Sprintf("keys by hash range %d/%d; overlapping range refused: %v", len(keysOf[0]), len(keysOf[1]), err), nil
}
