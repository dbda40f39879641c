package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func receive(c pulsar.Consumer, within time.Duration) (pulsar.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	m, err := c.Receive(ctx)
	if err != nil {
		return nil, fmt.Errorf("nothing received within %s: %w", within, err)
	}
	return m, nil
}

// receiveN takes n messages, each awaited up to patience.
func receiveN(c pulsar.Consumer, n int) ([]pulsar.Message, error) {
	var got []pulsar.Message
	for len(got) < n {
		m, err := receive(c, patience)
		if err != nil {
			return got, fmt.Errorf("after %d of %d: %w", len(got), n, err)
		}
		got = append(got, m)
	}
	return got, nil
}

// quiet fails if the consumer receives anything within quietFor.
func quiet(c pulsar.Consumer) error {
	ctx, cancel := context.WithTimeout(context.Background(), quietFor)
	defer cancel()
	m, err := c.Receive(ctx)
	if err == nil {
		return fmt.Errorf("unexpected message %q", m.Payload())
	}
	return nil
}

func payloads(ms []pulsar.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Payload())
	}
	return out
}

func sorted(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}

func same(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

func expect(what string, got, want interface{}) error {
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("%s: got %v, want %v", what, got, want)
	}
	return nil
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func send(p pulsar.Producer, msg *pulsar.ProducerMessage) (pulsar.MessageID, error) {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	return p.Send(ctx, msg)
}

func sendAll(p pulsar.Producer, bodies []string) ([]pulsar.MessageID, error) {
	var ids []pulsar.MessageID
	for _, b := range bodies {
		id, err := send(p, &pulsar.ProducerMessage{Payload: []byte(b)})
		if err != nil {
			return ids, fmt.Errorf("send %s: %w", b, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// sendBatch sends the bodies asynchronously then flushes, so a batching producer puts them in
// one batch.
func sendBatch(p pulsar.Producer, msgs []*pulsar.ProducerMessage) ([]pulsar.MessageID, error) {
	ids := make([]pulsar.MessageID, len(msgs))
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	for i, m := range msgs {
		wg.Add(1)
		i := i
		p.SendAsync(context.Background(), m, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			ids[i], errs[i] = id, err
			wg.Done()
		})
	}
	if err := p.Flush(); err != nil {
		return nil, err
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}

// adminGet reads a JSON document of the admin REST API.
func adminGet(e *env, path string, into interface{}) error {
	c := http.Client{Timeout: patience}
	resp, err := c.Get(strings.TrimRight(e.adminURL, "/") + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return json.Unmarshal(body, into)
}

// localName is a topic's name without persistent://public/default/.
func localName(topic string) string {
	return topic[strings.LastIndex(topic, "/")+1:]
}
