package pulsarctl.clients;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.KeySharedPolicy;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Range;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.common.util.Murmur3_32Hash;

/** Every subscription type. */
final class Subscriptions {
    /** One consumer gets everything; a second on the subscription is refused. */
    static String exclusive(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            Consumer<byte[]> c1 = cl.newConsumer().topic(t).subscriptionName("s")
                    .subscriptionType(SubscriptionType.Exclusive).subscribe();
            try {
                cl.newConsumer().topic(t).subscriptionName("s").subscriptionType(SubscriptionType.Exclusive)
                        .subscribe().close();
                throw new AssertionError("a second exclusive consumer was accepted");
            } catch (PulsarClientException.ConsumerBusyException expected) {
                // as real Pulsar
            }
            try {
                cl.newConsumer().topic(t).subscriptionName("s").subscriptionType(SubscriptionType.Shared)
                        .subscribe().close();
                throw new AssertionError("a shared consumer joined an exclusive subscription");
            } catch (PulsarClientException.ConsumerBusyException expected) {
                // as real Pulsar
            }
            Producer<byte[]> p = cl.newProducer().topic(t).create();
            List<String> want = Env.names("m", 5);
            for (String b : want) {
                p.send(b.getBytes());
            }
            Env.expect("payloads", Env.payloads(Env.receive(c1, 5)), want);
            return "second consumer refused (ConsumerBusy); 5 in order";
        }
    }

    /** The active consumer gets everything; when it leaves, the other gets the rest. */
    static String failover(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            Consumer<byte[]> a = cl.newConsumer().topic(t).subscriptionName("s").consumerName("a")
                    .subscriptionType(SubscriptionType.Failover).subscribe();
            Consumer<byte[]> b = cl.newConsumer().topic(t).subscriptionName("s").consumerName("b")
                    .subscriptionType(SubscriptionType.Failover).subscribe();
            Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(false).create();
            List<String> want = Env.names("m", 6);
            for (String body : want) {
                p.send(body.getBytes());
            }
            // Which consumer is active is the broker's choice: the one that receives.
            Consumer<byte[]> active = null;
            Consumer<byte[]> standby = null;
            Message<byte[]> first = null;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Env.PATIENCE_S);
            while (first == null && System.nanoTime() < deadline) {
                for (Consumer<byte[]> c : List.of(a, b)) {
                    Message<byte[]> m = c.receive(100, TimeUnit.MILLISECONDS);
                    if (m != null) {
                        first = m;
                        active = c;
                        standby = c == a ? b : a;
                        break;
                    }
                }
            }
            Env.check(first != null, "neither consumer received");
            List<Message<byte[]>> got = new ArrayList<>(List.of(first));
            got.addAll(Env.receive(active, 2));
            for (Message<byte[]> m : got) {
                active.acknowledge(m);
            }
            Env.quiet(standby);
            active.close();
            List<Message<byte[]>> rest = Env.receive(standby, 3);
            List<String> all = Env.payloads(got);
            all.addAll(Env.payloads(rest));
            Env.expect("payloads", all, want);
            return active.getConsumerName() + " took 3, " + standby.getConsumerName()
                    + " the other 3 after it closed";
        }
    }

    /** Two consumers split the messages between them, each message to one. */
    static String shared(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            List<Consumer<byte[]>> cs = new ArrayList<>();
            for (String n : List.of("a", "b")) {
                cs.add(cl.newConsumer().topic(t).subscriptionName("s").consumerName(n).receiverQueueSize(5)
                        .subscriptionType(SubscriptionType.Shared).subscribe());
            }
            Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(false).create();
            List<String> want = Env.names("m", 20);
            for (String b : want) {
                p.send(b.getBytes());
            }
            List<List<String>> got = drain(cs, want.size());
            List<String> all = new ArrayList<>();
            for (List<String> g : got) {
                Env.check(!g.isEmpty(), "a consumer got nothing: " + got);
                all.addAll(g);
            }
            Collections.sort(all);
            List<String> sortedWant = new ArrayList<>(want);
            Collections.sort(sortedWant);
            Env.expect("payloads", all, sortedWant);
            return "split " + got.get(0).size() + "/" + got.get(1).size();
        }
    }

    /** Receives from every consumer in turn, acking, until total messages arrived. */
    static List<List<String>> drain(List<Consumer<byte[]>> cs, int total) throws PulsarClientException {
        List<List<String>> got = new ArrayList<>();
        for (int i = 0; i < cs.size(); i++) {
            got.add(new ArrayList<>());
        }
        int count = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2 * Env.PATIENCE_S);
        while (count < total && System.nanoTime() < deadline) {
            for (int i = 0; i < cs.size(); i++) {
                Message<byte[]> m = cs.get(i).receive(100, TimeUnit.MILLISECONDS);
                if (m != null) {
                    cs.get(i).acknowledge(m);
                    got.get(i).add(new String(m.getData()));
                    count++;
                }
            }
        }
        Env.check(count >= total, "received " + count + " of " + total);
        return got;
    }

    static List<Set<String>> keyed(Env e, PulsarClient cl, boolean sticky) throws Exception {
        String t = e.topic("");
        List<Consumer<byte[]>> cs = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            var b = cl.newConsumer().topic(t).subscriptionName("s").consumerName("c" + i)
                    .subscriptionType(SubscriptionType.Key_Shared);
            if (sticky) {
                b.keySharedPolicy(KeySharedPolicy.stickyHashRange().ranges(Range.of(i * 32768, i * 32768 + 32767)));
            }
            cs.add(b.subscribe());
        }
        Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(false).create();
        List<String> keys = Env.names("k", 20);
        for (int round = 0; round < 3; round++) {
            for (String k : keys) {
                p.newMessage().key(k).value((k + "/" + round).getBytes()).send();
            }
        }
        List<List<String>> got = drain(cs, 3 * keys.size());
        List<Set<String>> keysOf = new ArrayList<>();
        for (List<String> g : got) {
            Set<String> ks = new HashSet<>();
            for (String m : g) {
                ks.add(m.split("/")[0]);
            }
            keysOf.add(ks);
        }
        for (String k : keysOf.get(0)) {
            Env.check(!keysOf.get(1).contains(k), "key " + k + " went to both consumers");
        }
        return keysOf;
    }

    /** Every key goes to one consumer only. */
    static String keyShared(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            List<Set<String>> keysOf = keyed(e, cl, false);
            return "keys split " + keysOf.get(0).size() + "/" + keysOf.get(1).size() + ", none on both";
        }
    }

    /** Sticky hash ranges: each consumer gets exactly the keys hashing into its range; an
     *  overlapping range is refused. */
    static String keySharedSticky(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            List<Set<String>> keysOf = keyed(e, cl, true);
            for (int i = 0; i < 2; i++) {
                for (String k : keysOf.get(i)) {
                    // Pulsar's hash of a key for Key_Shared: Murmur3 32, modulo the range size.
                    int h = Murmur3_32Hash.getInstance().makeHash(k.getBytes(StandardCharsets.UTF_8)) % 65536;
                    Env.check(h / 32768 == i, "key " + k + " (hash " + h + ") went to consumer " + i);
                }
            }
            try {
                cl.newConsumer().topic(e.topic("")).subscriptionName("s").consumerName("c")
                        .subscriptionType(SubscriptionType.Key_Shared)
                        .keySharedPolicy(KeySharedPolicy.stickyHashRange().ranges(Range.of(100, 40000)))
                        .subscribe().close();
                throw new AssertionError("a consumer with an overlapping range was accepted");
            } catch (PulsarClientException expected) {
                Env.check(String.valueOf(expected.getMessage()).contains("Range conflict"),
                        "overlapping range: " + expected);
            }
            return "keys by hash range " + keysOf.get(0).size() + "/" + keysOf.get(1).size()
                    + "; overlapping range refused";
        }
    }

    private Subscriptions() {
    }
}
