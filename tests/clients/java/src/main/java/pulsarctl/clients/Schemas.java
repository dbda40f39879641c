package pulsarctl.clients;

import java.util.Objects;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.common.schema.KeyValue;
import org.apache.pulsar.common.schema.KeyValueEncodingType;
import pulsarctl.clients.proto.ScenarioProto;

/** Avro, JSON, Protobuf and KeyValue schemas: a round trip, and what the broker registered. */
final class Schemas {
    /** The record of the Avro, JSON and KeyValue scenarios. */
    public static class Reading {
        public String sensor;
        public long value;

        public Reading() {
        }

        Reading(String sensor, long value) {
            this.sensor = sensor;
            this.value = value;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Reading && Objects.equals(((Reading) o).sensor, sensor)
                    && ((Reading) o).value == value;
        }

        @Override
        public int hashCode() {
            return Objects.hash(sensor, value);
        }

        @Override
        public String toString() {
            return "{" + sensor + " " + value + "}";
        }
    }

    /** The same record with a field more and no default: FULL compatibility refuses it. */
    public static class ReadingWithUnit {
        public String sensor;
        public long value;
        public int unit;
    }

    /** Sends v, receives it with the same schema; returns the registered schema's JSON. */
    static <T> String roundTrip(Env e, Schema<T> schema, T v) throws Exception {
        try (PulsarClient cl = e.client()) {
            String t = e.topic("");
            Consumer<T> c = cl.newConsumer(schema).topic(t).subscriptionName("s").subscribe();
            Producer<T> p = cl.newProducer(schema).topic(t).create();
            p.send(v);
            Message<T> m = Env.receive(c);
            Env.expect("decoded", m.getValue(), v);
            return e.adminGet("/admin/v2/schemas/public/default/" + Env.local(t) + "/schema");
        }
    }

    static String avro(Env e) throws Exception {
        String doc = roundTrip(e, Schema.AVRO(Reading.class), new Reading("t1", 42));
        Env.expect("registered type", Json.string(doc, "type"), "AVRO");
        try (PulsarClient cl = e.client()) {
            cl.newProducer(Schema.AVRO(ReadingWithUnit.class)).topic(e.topic("")).create().close();
            throw new AssertionError("an incompatible Avro schema was accepted");
        } catch (PulsarClientException.IncompatibleSchemaException expected) {
            // as real Pulsar (FULL, the namespace default)
        }
        return "round trip; registered AVRO; incompatible schema refused (IncompatibleSchemaException)";
    }

    static String json(Env e) throws Exception {
        String doc = roundTrip(e, Schema.JSON(Reading.class), new Reading("t2", 7));
        Env.expect("registered type", Json.string(doc, "type"), "JSON");
        return "round trip; registered JSON";
    }

    static String protobuf(Env e) throws Exception {
        String doc = roundTrip(e, Schema.PROTOBUF(ScenarioProto.Reading.class),
                ScenarioProto.Reading.newBuilder().setSensor("t3").setValue(99).build());
        Env.expect("registered type", Json.string(doc, "type"), "PROTOBUF");
        return "round trip; registered PROTOBUF";
    }

    static String keyValue(Env e) throws Exception {
        String doc = roundTrip(e, Schema.KeyValue(Schema.STRING, Schema.JSON(Reading.class),
                KeyValueEncodingType.SEPARATED), new KeyValue<>("id-1", new Reading("t4", 5)));
        Env.expect("registered type", Json.string(doc, "type"), "KEY_VALUE");
        Env.expect("encoding", Json.string(doc, "kv.encoding.type"), "SEPARATED");
        return "round trip (SEPARATED: the key in the message key); registered KEY_VALUE";
    }

    private Schemas() {
    }
}
