package pulsarctl.clients;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

/** Chunking, delayed delivery, readers with seek, regex subscriptions, access modes, auth. */
final class Features {
    /** A payload ten times the chunk size arrives whole. */
    static String chunking(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            Consumer<byte[]> c = cl.newConsumer().topic(t).subscriptionName("s").subscribe();
            Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(false).enableChunking(true)
                    .chunkMaxMessageSize(1000).create();
            byte[] big = "0123456789".repeat(1000).getBytes();
            MessageId id = p.newMessage().value(big).property("p", "v").send();
            MessageId after = p.send("after".getBytes());
            Message<byte[]> m = Env.receive(c);
            Env.check(Arrays.equals(m.getData(), big) && "v".equals(m.getProperty("p")),
                    "got " + m.getData().length + " bytes, properties " + m.getProperties());
            c.acknowledge(m);
            Env.expect("next", new String(Env.receive(c).getData()), "after");
            // The chunks are the topic's first entries; the next message follows them.
            long entry = Long.parseLong(after.toString().split(":")[1]);
            Env.check(entry >= 10, "ids " + id + " then " + after + ": fewer than 10 chunks");
            return "10000 bytes in " + entry + " chunks, id " + id;
        }
    }

    /** A message sent with deliverAfter 2 s reaches a Shared consumer after the messages sent
     *  after it, and not before deliverAt less the broker's tick (1 s). */
    static String delayedDelivery(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            Consumer<byte[]> c = cl.newConsumer().topic(t).subscriptionName("s")
                    .subscriptionType(SubscriptionType.Shared).subscribe();
            Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(false).create();
            long sent = System.nanoTime();
            p.newMessage().value("late".getBytes()).deliverAfter(2, TimeUnit.SECONDS).send();
            p.send("now".getBytes());
            String first = new String(Env.receive(c).getData());
            String second = new String(Env.receive(c).getData());
            long after = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - sent);
            Env.expect("order", List.of(first, second), List.of("now", "late"));
            Env.check(after >= 900, "delayed message delivered " + after + " ms after sending");
            return "the delayed message arrived " + after + " ms after sending";
        }
    }

    /** A reader from the earliest; seeks to a message id, a publish time, the earliest; readers
     *  started at a message id, exclusive and inclusive. */
    static String readerSeek(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(false).create();
            List<MessageId> ids = new ArrayList<>();
            for (String b : Env.names("m", 10)) {
                ids.add(p.send(b.getBytes()));
            }
            List<Long> times = new ArrayList<>();
            List<String> all = new ArrayList<>();
            try (Reader<byte[]> r = cl.newReader().topic(t).startMessageId(MessageId.earliest).create()) {
                while (all.size() < 10) {
                    Message<byte[]> m = r.readNext(Env.PATIENCE_S, TimeUnit.SECONDS);
                    Env.check(m != null, "from earliest: " + all.size() + " of 10");
                    all.add(new String(m.getData()));
                    times.add(m.getPublishTime());
                }
                Env.check(!r.hasMessageAvailable(), "hasMessageAvailable at the end");
            }
            Env.expect("from earliest", all, Env.names("m", 10));
            List<String> steps = new ArrayList<>();
            // Seeking by time serves the first message published at or after it: m-7, or an
            // earlier message sent in the same millisecond (a fast send shares it).
            int firstAt7 = times.indexOf(times.get(7));
            // A reader (start not inclusive) hands out what follows the id it sought to. Each case:
            // what, what the step says (timing-free, so runs compare equal), the message wanted.
            String[][] cases = {{"seek to m-4's id", "m-5", "m-5"},
                {"seek to m-7's publish time", "the first message of m-7's millisecond", "m-" + firstAt7},
                {"seek to earliest", "m-0", "m-0"}};
            for (int i = 0; i < cases.length; i++) {
                String[] c = cases[i];
                try (Reader<byte[]> r = cl.newReader().topic(t).startMessageId(MessageId.latest).create()) {
                    switch (i) {
                        case 0: r.seek(ids.get(4)); break;
                        case 1: r.seek(times.get(7)); break;
                        default: r.seek(MessageId.earliest);
                    }
                    Message<byte[]> m = r.readNext(Env.PATIENCE_S, TimeUnit.SECONDS);
                    Env.check(m != null, "nothing after " + c[0]);
                    steps.add(c[0] + " -> " + c[1]);
                    Env.expect(c[0], new String(m.getData()), c[2]);
                }
            }
            for (boolean inclusive : new boolean[] {false, true}) {
                var b = cl.newReader().topic(t).startMessageId(ids.get(2));
                if (inclusive) {
                    b.startMessageIdInclusive();
                }
                try (Reader<byte[]> r = b.create()) {
                    Message<byte[]> m = r.readNext(Env.PATIENCE_S, TimeUnit.SECONDS);
                    Env.check(m != null, "nothing from m-2's id");
                    Env.expect("reader from m-2's id, inclusive=" + inclusive, new String(m.getData()),
                            inclusive ? "m-2" : "m-3");
                }
            }
            return String.join("; ", steps) + "; start at m-2's id: m-3 exclusive, m-2 inclusive";
        }
    }

    /** A pattern subscription picks up a topic created after it subscribed. */
    static String regexNewTopics(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            Producer<byte[]> p0 = cl.newProducer().topic(e.topic("-old")).create();
            Consumer<byte[]> c = cl.newConsumer()
                    .topicsPattern(Pattern.compile("persistent://public/default/" + e.prefix + "-" + e.name + "-.*"))
                    .patternAutoDiscoveryPeriod(1, TimeUnit.SECONDS).subscriptionName("s")
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
            p0.send("on old".getBytes());
            Env.expect("existing topic", new String(Env.receive(c).getData()), "on old");
            String newer = e.topic("-new");
            Producer<byte[]> p1 = cl.newProducer().topic(newer).create();
            p1.send("on new".getBytes());
            Message<byte[]> m = Env.receive(c);
            Env.expect("new topic", new String(m.getData()) + "@" + m.getTopicName(), "on new@" + newer);
            return "saw the topic made after subscribing";
        }
    }

    /** An Exclusive producer keeps others out (Shared: ProducerBusy, Exclusive:
     *  ProducerFenced); a WaitForExclusive producer gets the topic when it closes. */
    static String accessModes(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            Producer<byte[]> ex = cl.newProducer().topic(t).producerName("ex")
                    .accessMode(ProducerAccessMode.Exclusive).create();
            try {
                cl.newProducer().topic(t).accessMode(ProducerAccessMode.Shared).create().close();
                throw new AssertionError("a Shared producer was accepted beside the exclusive one");
            } catch (PulsarClientException.ProducerBusyException expected) {
                // as real Pulsar
            }
            try {
                cl.newProducer().topic(t).accessMode(ProducerAccessMode.Exclusive).create().close();
                throw new AssertionError("a second Exclusive producer was accepted");
            } catch (PulsarClientException.ProducerFencedException expected) {
                // as real Pulsar
            }
            CompletableFuture<Producer<byte[]>> waiter = cl.newProducer().topic(t).producerName("waiter")
                    .accessMode(ProducerAccessMode.WaitForExclusive).createAsync();
            try {
                waiter.get(Env.QUIET_MS, TimeUnit.MILLISECONDS);
                throw new AssertionError("WaitForExclusive did not wait");
            } catch (TimeoutException expected) {
                // still waiting, as it should
            }
            ex.close();
            Producer<byte[]> w = waiter.get(Env.PATIENCE_S, TimeUnit.SECONDS);
            w.send("x".getBytes());
            w.close();
            return "refused: ProducerBusy, ProducerFenced; the waiter took over";
        }
    }

    /** A client whose token the broker refuses fails at once with AuthenticationException. */
    static String authRefused(Env e) throws Exception {
        Env.check(!e.authServiceUrl.isEmpty(), "no --auth-service-url given");
        // A well-formed HS256 token signed with a key the broker does not know.
        String bad = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.sM0F9ppJSoVgvLTRAJtHZNMD0JpGhmVN8vPzgy9bLkk";
        try (PulsarClient cl = PulsarClient.builder().serviceUrl(e.authServiceUrl)
                .authentication(AuthenticationFactory.token(bad))
                .operationTimeout(Env.PATIENCE_S, TimeUnit.SECONDS).build()) {
            long start = System.nanoTime();
            try {
                cl.newProducer().topic(e.topic("")).create().close();
                throw new AssertionError("a producer was created with a refused token");
            } catch (PulsarClientException.AuthenticationException expected) {
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                Env.check(String.valueOf(expected.getMessage()).contains("Failed to authenticate"),
                        "message: " + expected.getMessage());
                return "AuthenticationException after " + ms + " ms: " + expected.getMessage();
            }
        }
    }

    private Features() {
    }
}
