package pulsarctl.clients;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.ConsumerBuilder;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.impl.MultiplierRedeliveryBackoff;

/** Individual, cumulative and batch-index acks with ack receipts; negative acks with backoff. */
final class Acks {
    /** Acks with receipts on; after the consumer leaves, only what was not acked comes back. */
    static String individual(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            ConsumerBuilder<byte[]> cb = cl.newConsumer().topic(t).subscriptionName("s")
                    .subscriptionType(SubscriptionType.Shared).isAckReceiptEnabled(true);
            Consumer<byte[]> c = cb.subscribe();
            Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(false).create();
            for (String b : Env.names("m", 5)) {
                p.send(b.getBytes());
            }
            List<Message<byte[]>> got = Env.receive(c, 5);
            // With receipts on, acknowledge() returns once the broker answered.
            c.acknowledge(got.get(1));
            c.acknowledgeAsync(got.get(3).getMessageId()).get(Env.PATIENCE_S, TimeUnit.SECONDS);
            c.close();
            c = cb.subscribe();
            List<Message<byte[]>> again = Env.receive(c, 3);
            for (Message<byte[]> m : again) {
                c.acknowledge(m);
            }
            Env.quiet(c);
            Env.expect("redelivered", Env.payloads(again), List.of("m-0", "m-2", "m-4"));
            return "acked 2 of 5 with receipts; the 3 others came back";
        }
    }

    /** One cumulative ack covers every earlier message. */
    static String cumulative(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            ConsumerBuilder<byte[]> cb = cl.newConsumer().topic(t).subscriptionName("s")
                    .subscriptionType(SubscriptionType.Exclusive).isAckReceiptEnabled(true);
            Consumer<byte[]> c = cb.subscribe();
            Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(false).create();
            for (String b : Env.names("m", 5)) {
                p.send(b.getBytes());
            }
            List<Message<byte[]>> got = Env.receive(c, 5);
            c.acknowledgeCumulative(got.get(2));
            c.close();
            c = cb.subscribe();
            List<Message<byte[]>> again = Env.receive(c, 2);
            Env.quiet(c);
            String stats = e.adminGet("/admin/v2/persistent/public/default/" + Env.local(t) + "/stats");
            Env.expect("msgBacklog", Json.number(stats.substring(stats.indexOf("\"subscriptions\"")), "msgBacklog"), 2);
            Env.expect("redelivered", Env.payloads(again), List.of("m-3", "m-4"));
            return "cumulative ack of the 3rd left 2, backlog 2";
        }
    }

    /** Single messages of one batch acked one by one (batch index acks, with receipts); the
     *  batch comes back with only the others. */
    static String batchIndex(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            ConsumerBuilder<byte[]> cb = cl.newConsumer().topic(t).subscriptionName("s")
                    .subscriptionType(SubscriptionType.Shared).isAckReceiptEnabled(true)
                    .enableBatchIndexAcknowledgment(true);
            Consumer<byte[]> c = cb.subscribe();
            Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(true).batchingMaxMessages(100)
                    .batchingMaxPublishDelay(1, TimeUnit.HOURS).create();
            List<CompletableFuture<MessageId>> sent = new ArrayList<>();
            for (String b : Env.names("m", 5)) {
                sent.add(p.sendAsync(b.getBytes()));
            }
            p.flush();
            String first = sent.get(0).get().toString();
            String last = sent.get(4).get().toString();
            Env.check(first.substring(0, first.lastIndexOf(':')).equals(last.substring(0, last.lastIndexOf(':'))),
                    "not one batch: " + first + " .. " + last);
            List<Message<byte[]>> got = Env.receive(c, 5);
            c.acknowledge(got.get(0));
            c.acknowledge(got.get(2));
            c.close();
            c = cb.subscribe();
            List<Message<byte[]>> again = Env.receive(c, 3);
            Env.quiet(c);
            Env.expect("redelivered", Env.payloads(again), List.of("m-1", "m-3", "m-4"));
            return "acked indexes 0 and 2 of a batch of 5; 1, 3, 4 came back";
        }
    }

    /** A negatively acked message comes back after the backoff for its redelivery count
     *  (1 s, then 2 s), the count raised by the broker each time. */
    static String nackBackoff(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            Consumer<byte[]> c = cl.newConsumer().topic(t).subscriptionName("s")
                    .subscriptionType(SubscriptionType.Shared)
                    .negativeAckRedeliveryBackoff(MultiplierRedeliveryBackoff.builder()
                            .minDelayMs(1000).maxDelayMs(60000).multiplier(2).build())
                    .subscribe();
            Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(false).create();
            p.send("x".getBytes());
            List<Integer> counts = new ArrayList<>();
            List<Long> gaps = new ArrayList<>();
            long last = 0;
            for (int i = 0; i < 3; i++) {
                Message<byte[]> m = Env.receive(c);
                long now = System.nanoTime();
                if (i > 0) {
                    gaps.add(TimeUnit.NANOSECONDS.toMillis(now - last));
                }
                last = now;
                counts.add(m.getRedeliveryCount());
                if (i < 2) {
                    c.negativeAcknowledge(m);
                } else {
                    c.acknowledge(m);
                }
            }
            Env.expect("redelivery counts", counts, List.of(0, 1, 2));
            // The client holds the message back for the backoff (its timer ticks coarsely:
            // allow a little slack).
            for (int i = 0; i < gaps.size(); i++) {
                long min = (1000L << i) - 150;
                Env.check(gaps.get(i) >= min, "redelivery " + (i + 1) + " after " + gaps.get(i)
                        + " ms, before the backoff " + (1000L << i) + " ms");
            }
            return "counts " + counts + ", gaps (ms) " + gaps;
        }
    }

    private Acks() {
    }
}
