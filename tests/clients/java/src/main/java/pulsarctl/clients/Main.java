package pulsarctl.clients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The Java scenario program of tests/clients: the real Pulsar Java client against a Pulsar
 * service (a real Apache Pulsar standalone, or pulsarctl serve). Each scenario runs on topics
 * and subscriptions of its own and prints one JSON line {"scenario", "ok", "detail"}; the
 * program exits 1 if any failed. What a scenario asserts is what real Pulsar does.
 *
 * <pre>
 *   java -cp ... pulsarctl.clients.Main --service-url pulsar://127.0.0.1:6650 \
 *       --admin-url http://127.0.0.1:8080 --prefix run1 \
 *       [--auth-service-url pulsar://127.0.0.1:6651] [--only a,b]
 * </pre>
 */
public final class Main {
    /** A scenario: returns its detail, throws on failure. */
    interface Scenario {
        String run(Env env) throws Exception;
    }

    // Generous: the machine running these is shared. Waits end at the event awaited.
    static final long SCENARIO_LIMIT_S = 120;

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opts.put(args[i].replaceFirst("^--?", ""), args[i + 1]);
        }
        Env base = new Env(
                opts.getOrDefault("service-url", "pulsar://127.0.0.1:6650"),
                opts.getOrDefault("admin-url", "http://127.0.0.1:8080"),
                opts.getOrDefault("prefix", "java-" + System.nanoTime()),
                opts.getOrDefault("auth-service-url", ""));
        List<String> only = new ArrayList<>();
        for (String n : opts.getOrDefault("only", "").split(",")) {
            if (!n.isEmpty()) {
                only.add(n);
            }
        }
        Map<String, Scenario> all = new LinkedHashMap<>();
        all.put("exclusive", Subscriptions::exclusive);
        all.put("failover", Subscriptions::failover);
        all.put("shared", Subscriptions::shared);
        all.put("key_shared", Subscriptions::keyShared);
        all.put("key_shared_sticky", Subscriptions::keySharedSticky);
        all.put("ack_individual", Acks::individual);
        all.put("ack_cumulative", Acks::cumulative);
        all.put("ack_batch_index", Acks::batchIndex);
        all.put("nack_backoff", Acks::nackBackoff);
        all.put("dead_letter", Letters::deadLetter);
        all.put("retry_letter", Letters::retryLetter);
        all.put("chunking", Features::chunking);
        all.put("delayed_delivery", Features::delayedDelivery);
        all.put("reader_seek", Features::readerSeek);
        all.put("regex_new_topics", Features::regexNewTopics);
        all.put("schema_avro", Schemas::avro);
        all.put("schema_json", Schemas::json);
        all.put("schema_protobuf", Schemas::protobuf);
        all.put("schema_keyvalue", Schemas::keyValue);
        all.put("access_modes", Features::accessModes);
        all.put("auth_refused", Features::authRefused);

        int failed = 0;
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        for (Map.Entry<String, Scenario> s : all.entrySet()) {
            if (!only.isEmpty() && !only.contains(s.getKey())) {
                continue;
            }
            Env env = base.named(s.getKey());
            boolean ok;
            String detail;
            Future<String> f = pool.submit(() -> s.getValue().run(env));
            try {
                detail = f.get(SCENARIO_LIMIT_S, TimeUnit.SECONDS);
                ok = true;
            } catch (TimeoutException e) {
                f.cancel(true);
                ok = false;
                detail = "did not finish within " + SCENARIO_LIMIT_S + "s";
            } catch (java.util.concurrent.ExecutionException e) {
                ok = false;
                Throwable c = e.getCause();
                detail = c.getClass().getSimpleName() + ": " + c.getMessage();
            }
            if (!ok) {
                failed++;
            }
            if (detail != null && detail.length() > 400) { // a broker's error may carry schemas
                detail = detail.substring(0, 400) + "...";
            }
            System.out.println("{\"scenario\":" + Json.quote(s.getKey()) + ",\"ok\":" + ok
                    + ",\"detail\":" + Json.quote(String.valueOf(detail)) + "}");
            System.out.flush();
        }
        System.exit(failed > 0 ? 1 : 0);
    }

    private Main() {
    }
}
