// The Go scenario program of tests/clients: the real pulsar-client-go against a Pulsar service
// (a real Apache Pulsar standalone, or pulsarctl serve). Each scenario runs on topics and
// subscriptions of its own and prints one JSON line {"scenario", "ok", "detail"}; the program
// exits 1 if any failed. What a scenario asserts is what real Pulsar does.
//
//	scenarios -service-url pulsar://127.0.0.1:6650 -admin-url http://127.0.0.1:8080 \
//	    -prefix run1 [-auth-service-url pulsar://127.0.0.1:6651] [-only a,b]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// Generous bounds: the machine running these is shared and may be slow. Waits end at the
// event awaited; the bounds only stop a scenario that would otherwise hang.
const (
	patience        = 30 * time.Second
	scenarioLimit   = 120 * time.Second
	quietFor        = 1500 * time.Millisecond // "nothing more arrives" is checked this long
	operationTimout = 30 * time.Second
)

type env struct {
	serviceURL     string
	adminURL       string
	prefix         string
	authServiceURL string
	name           string // the running scenario
}

// topic gives the scenario's own topic in public/default.
func (e *env) topic(suffix string) string {
	return fmt.Sprintf("persistent://public/default/%s-%s%s", e.prefix, e.name, suffix)
}

func (e *env) client() (pulsar.Client, error) {
	return pulsar.NewClient(pulsar.ClientOptions{
		URL:               e.serviceURL,
		OperationTimeout:  operationTimout,
		ConnectionTimeout: operationTimout,
		Logger:            quietLogger(),
	})
}

func quietLogger() plog.Logger {
	level := slog.LevelError + 4 // the client's own warnings would drown the JSON lines
	if os.Getenv("SCENARIO_DEBUG") != "" {
		level = slog.LevelInfo
	}
	h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	if os.Getenv("SCENARIO_DEBUG") == "" {
		h = slog.NewTextHandler(io.Discard, nil)
	}
	return plog.NewLoggerWithSlog(slog.New(h))
}

type scenario struct {
	name string
	run  func(e *env) (string, error)
}

var scenarios = []scenario{
	{"exclusive", exclusive},
	{"failover", failover},
	{"shared", shared},
	{"key_shared", keyShared},
	{"key_shared_sticky", keySharedSticky},
	{"ack_individual", ackIndividual},
	{"ack_cumulative", ackCumulative},
	{"ack_batch_index", ackBatchIndex},
	{"nack_backoff", nackBackoff},
	{"dead_letter", deadLetter},
	{"retry_letter", retryLetter},
	{"chunking", chunking},
	{"delayed_delivery", delayedDelivery},
	{"reader_seek", readerSeek},
	{"regex_new_topics", regexNewTopics},
	{"schema_avro", schemaAvro},
	{"schema_json", schemaJSON},
	{"schema_protobuf", schemaProtobuf},
	{"schema_keyvalue", schemaKeyValue},
	{"access_modes", accessModes},
	{"auth_refused", authRefused},
}

type result struct {
	Scenario string `json:"scenario"`
	OK       bool   `json:"ok"`
	Detail   string `json:"detail"`
}

func runOne(e env, s scenario) result {
	e.name = s.name
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{s.name, false, fmt.Sprintf("panic: %v", r)}
			}
		}()
		detail, err := s.run(&e)
		if err != nil {
			done <- result{s.name, false, err.Error()}
			return
		}
		done <- result{s.name, true, detail}
	}()
	select {
	case r := <-done:
		if len(r.Detail) > 400 { // a broker's error may carry whole schemas
			r.Detail = r.Detail[:400] + "..."
		}
		return r
	case <-time.After(scenarioLimit):
		return result{s.name, false, fmt.Sprintf("did not finish within %s", scenarioLimit)}
	}
}

func main() {
	var e env
	var only string
	flag.StringVar(&e.serviceURL, "service-url", "pulsar://127.0.0.1:6650", "the binary protocol's URL")
	flag.StringVar(&e.adminURL, "admin-url", "http://127.0.0.1:8080", "the admin REST API's URL")
	flag.StringVar(&e.prefix, "prefix", fmt.Sprintf("go-%d", time.Now().UnixNano()), "topic name prefix")
	flag.StringVar(&e.authServiceURL, "auth-service-url", "",
		"a service with token authentication on, for auth_refused")
	flag.StringVar(&only, "only", "", "comma-separated scenario names (default: all)")
	flag.Parse()

	wanted := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n != "" {
			wanted[n] = true
		}
	}
	failed := 0
	out := json.NewEncoder(os.Stdout)
	for _, s := range scenarios {
		if len(wanted) > 0 && !wanted[s.name] {
			continue
		}
		r := runOne(e, s)
		if !r.OK {
			failed++
		}
		_ = out.Encode(r)
	}
	if failed > 0 {
		os.Exit(1)
	}
}
