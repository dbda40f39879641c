package pulsarctl.clients;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.DeadLetterPolicy;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

/** Dead letter and retry letter policies (default topic names TOPIC-SUB-DLQ, -RETRY). */
final class Letters {
    static String deadLetter(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            String dlqTopic = t + "-s-DLQ";
            Consumer<byte[]> dlq = cl.newConsumer().topic(dlqTopic).subscriptionName("d")
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
            Consumer<byte[]> c = cl.newConsumer().topic(t).subscriptionName("s")
                    .subscriptionType(SubscriptionType.Shared)
                    .negativeAckRedeliveryDelay(1, TimeUnit.SECONDS)
                    .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(2).build())
                    .subscribe();
            Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(false).create();
            p.newMessage().key("k").property("a", "1").value("poison".getBytes()).send();
            // The Java client sends a message to the DLQ when it is negatively acked with a
            // redelivery count of maxRedeliverCount: three deliveries, counts 0, 1, 2.
            List<Integer> counts = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                Message<byte[]> m = Env.receive(c);
                counts.add(m.getRedeliveryCount());
                c.negativeAcknowledge(m);
            }
            Message<byte[]> dead = Env.receive(dlq);
            Env.expect("dead letter", new String(dead.getData()) + " " + dead.getKey() + " "
                    + dead.getProperty("a"), "poison k 1");
            Env.expect("REAL_TOPIC", dead.getProperty("REAL_TOPIC"), t);
            Env.quiet(c);
            Env.expect("redelivery counts", counts, List.of(0, 1, 2));
            return "delivered with counts " + counts + ", then to " + Env.local(dlqTopic);
        }
    }

    /** reconsumeLater sends the message to the retry topic with a delay; it comes back with
     *  RECONSUMETIMES raised; past maxRedeliverCount it goes to the DLQ. */
    static String retryLetter(Env e) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            Consumer<byte[]> dlq = cl.newConsumer().topic(t + "-s-DLQ").subscriptionName("d")
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
            Consumer<byte[]> c = cl.newConsumer().topic(t).subscriptionName("s")
                    .subscriptionType(SubscriptionType.Shared).enableRetry(true)
                    .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(2).build())
                    .subscribe();
            Producer<byte[]> p = cl.newProducer().topic(t).enableBatching(false).create();
            p.send("later".getBytes());
            List<String> seen = new ArrayList<>();
            long last = 0;
            for (int i = 0; i < 3; i++) {
                Message<byte[]> m = Env.receive(c);
                long now = System.nanoTime();
                // Pulsar delivers a delayed message once deliverAt less
                // delayedDeliveryTickTimeMillis (1 s) has passed: 2 s comes back after 1 s.
                Env.check(i == 0 || now - last >= TimeUnit.MILLISECONDS.toNanos(900),
                        "retry " + i + " came back after " + TimeUnit.NANOSECONDS.toMillis(now - last) + " ms");
                last = now;
                String reconsumed = m.getProperty("RECONSUMETIMES");
                seen.add(new String(m.getData()) + "@" + Env.local(m.getTopicName()) + "#"
                        + (reconsumed == null ? "" : reconsumed));
                c.reconsumeLater(m, 2, TimeUnit.SECONDS);
            }
            Message<byte[]> dead = Env.receive(dlq);
            String base = Env.local(t);
            Env.expect("deliveries", seen, List.of("later@" + base + "#", "later@" + base + "-s-RETRY#1",
                    "later@" + base + "-s-RETRY#2"));
            Env.expect("dead letter", new String(dead.getData()), "later");
            return seen + " then DLQ (RECONSUMETIMES " + dead.getProperty("RECONSUMETIMES") + ")";
        }
    }

    private Letters() {
    }
}
