package pulsarctl.clients;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;

/** Where the scenarios run, and the helpers they share. */
final class Env {
    static final int PATIENCE_S = 30;
    static final long QUIET_MS = 1500; // "nothing more arrives" is checked this long

    final String serviceUrl;
    final String adminUrl;
    final String prefix;
    final String authServiceUrl;
    final String name;

    Env(String serviceUrl, String adminUrl, String prefix, String authServiceUrl) {
        this(serviceUrl, adminUrl, prefix, authServiceUrl, "");
    }

    private Env(String serviceUrl, String adminUrl, String prefix, String authServiceUrl, String name) {
        this.serviceUrl = serviceUrl;
        this.adminUrl = adminUrl.replaceAll("/+$", "");
        this.prefix = prefix;
        this.authServiceUrl = authServiceUrl;
        this.name = name;
    }

    Env named(String scenario) {
        return new Env(serviceUrl, adminUrl, prefix, authServiceUrl, scenario);
    }

    /** The scenario's own topic in public/default. */
    String topic(String suffix) {
        return "persistent://public/default/" + prefix + "-" + name + suffix;
    }

    static String local(String topic) {
        return topic.substring(topic.lastIndexOf('/') + 1);
    }

    PulsarClient client() throws PulsarClientException {
        return PulsarClient.builder().serviceUrl(serviceUrl)
                .operationTimeout(PATIENCE_S, TimeUnit.SECONDS)
                .connectionTimeout(PATIENCE_S, TimeUnit.SECONDS).build();
    }

    static <T> Message<T> receive(Consumer<T> c) throws PulsarClientException {
        Message<T> m = c.receive(PATIENCE_S, TimeUnit.SECONDS);
        if (m == null) {
            throw new AssertionError("nothing received within " + PATIENCE_S + "s on " + c.getTopic());
        }
        return m;
    }

    static <T> List<Message<T>> receive(Consumer<T> c, int n) throws PulsarClientException {
        List<Message<T>> got = new ArrayList<>();
        while (got.size() < n) {
            Message<T> m = c.receive(PATIENCE_S, TimeUnit.SECONDS);
            if (m == null) {
                throw new AssertionError("after " + got.size() + " of " + n + ": nothing within "
                        + PATIENCE_S + "s");
            }
            got.add(m);
        }
        return got;
    }

    /** Fails if the consumer receives anything within QUIET_MS. */
    static <T> void quiet(Consumer<T> c) throws PulsarClientException {
        Message<T> m = c.receive((int) QUIET_MS, TimeUnit.MILLISECONDS);
        if (m != null) {
            throw new AssertionError("unexpected message " + new String(m.getData()));
        }
    }

    static List<String> payloads(List<? extends Message<?>> ms) {
        List<String> out = new ArrayList<>();
        for (Message<?> m : ms) {
            out.add(new String(m.getData()));
        }
        return out;
    }

    static List<String> names(String p, int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(p + "-" + i);
        }
        return out;
    }

    static void expect(String what, Object got, Object want) {
        if (!String.valueOf(got).equals(String.valueOf(want))) {
            throw new AssertionError(what + ": got " + got + ", want " + want);
        }
    }

    static void check(boolean cond, String why) {
        if (!cond) {
            throw new AssertionError(why);
        }
    }

    /** A document of the admin REST API, as text. */
    String adminGet(String path) throws Exception {
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(PATIENCE_S)).build();
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(adminUrl + path))
                .timeout(Duration.ofSeconds(PATIENCE_S)).GET().build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) {
            throw new AssertionError("GET " + path + ": " + r.statusCode() + " " + r.body());
        }
        return r.body();
    }
}
