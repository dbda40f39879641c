package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/apache/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

type reading struct {
	Sensor string `json:"sensor" avro:"sensor"`
	Value  int64  `json:"value" avro:"value"`
}

const readingAvro = `{"type":"record","name":"Reading","namespace":"pulsarctl.clients",` +
	`"fields":[{"name":"sensor","type":"string"},{"name":"value","type":"long"}]}`

// A change FULL compatibility (the namespace default) refuses: a new field with no default.
const readingAvroIncompatible = `{"type":"record","name":"Reading","namespace":"pulsarctl.clients",` +
	`"fields":[{"name":"sensor","type":"string"},{"name":"value","type":"long"},{"name":"unit","type":"string"}]}`

type schemaDoc struct {
	Version int64             `json:"version"`
	Type    string            `json:"type"`
	Data    string            `json:"data"`
	Props   map[string]string `json:"properties"`
}

// roundTrip sends v with the schema and decodes what a consumer with the same schema receives
// into out; it returns the schema the broker registered (admin REST).
func roundTrip(e *env, s pulsar.Schema, v interface{}, out interface{}) (schemaDoc, error) {
	var doc schemaDoc
	cl, err := e.client()
	if err != nil {
		return doc, err
	}
	defer cl.Close()
	t := e.topic("")
	c, err := cl.Subscribe(pulsar.ConsumerOptions{Topic: t, SubscriptionName: "s", Schema: s})
	if err != nil {
		return doc, err
	}
	defer c.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: t, Schema: s})
	if err != nil {
		return doc, err
	}
	defer p.Close()
	if _, err := send(p, &pulsar.ProducerMessage{Value: v}); err != nil {
		return doc, err
	}
	m, err := receive(c, patience)
	if err != nil {
		return doc, err
	}
	if kvs, ok := s.(*keyValueSchema); ok {
		// The Go client cannot build a KeyValue schema from the broker's schema info.
		err = kvs.Decode(m.Payload(), out)
	} else {
		err = m.GetSchemaValue(out)
	}
	if err != nil {
		return doc, fmt.Errorf("decode: %w", err)
	}
	err = adminGet(e, "/admin/v2/schemas/public/default/"+localName(t)+"/schema", &doc)
	return doc, err
}

func schemaAvro(e *env) (string, error) {
	var got reading
	doc, err := roundTrip(e, pulsar.NewAvroSchema(readingAvro, nil), &reading{"t1", 42}, &got)
	if err != nil {
		return "", err
	}
	if err := expect("decoded", got, reading{"t1", 42}); err != nil {
		return "", err
	}
	if err := expect("registered type", doc.Type, "AVRO"); err != nil {
		return "", err
	}
	cl, err := e.client()
	if err != nil {
		return "", err
	}
	defer cl.Close()
	p, err := cl.CreateProducer(pulsar.ProducerOptions{Topic: e.topic(""),
		Schema: pulsar.NewAvroSchema(readingAvroIncompatible, nil)})
	if err == nil {
		p.Close()
		return "", fmt.Errorf("an incompatible Avro schema was accepted")
	}
	return fmt.Sprintf("decoded %+v; registered AVRO version %d; incompatible schema refused: %v", got, doc.Version, err), nil
}

func schemaJSON(e *env) (string, error) {
	var got reading
	doc, err := roundTrip(e, pulsar.NewJSONSchema(readingAvro, nil), &reading{"t2", 7}, &got)
	if err != nil {
		return "", err
	}
	if err := expect("decoded", got, reading{"t2", 7}); err != nil {
		return "", err
	}
	if err := expect("registered type", doc.Type, "JSON"); err != nil {
		return "", err
	}
	return fmt.Sprintf("decoded %+v; registered JSON", got), nil
}

// readingDescriptor builds the Reading message of tests/clients/java/src/main/proto at run
// time, so no protoc is needed for Go.
func readingDescriptor() (protoreflect.MessageDescriptor, error) {
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("scenario.proto"),
		Package: proto.String("pulsarctl.clients"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Reading"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("sensor"), Number: proto.Int32(1), JsonName: proto.String("sensor"),
					Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
				{Name: proto.String("value"), Number: proto.Int32(2), JsonName: proto.String("value"),
					Type: descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
			},
		}},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		return nil, err
	}
	return f.Messages().ByName("Reading"), nil
}

func schemaProtobuf(e *env) (string, error) {
	md, err := readingDescriptor()
	if err != nil {
		return "", err
	}
	in := dynamicpb.NewMessage(md)
	in.Set(md.Fields().ByName("sensor"), protoreflect.ValueOfString("t3"))
	in.Set(md.Fields().ByName("value"), protoreflect.ValueOfInt64(99))
	out := dynamicpb.NewMessage(md)
	doc, err := roundTrip(e, pulsar.NewProtoSchema(readingAvro, nil), in, out)
	if err != nil {
		return "", err
	}
	if !proto.Equal(in, out) {
		return "", fmt.Errorf("decoded %v, sent %v", out, in)
	}
	if err := expect("registered type", doc.Type, "PROTOBUF"); err != nil {
		return "", err
	}
	return fmt.Sprintf("decoded {%v}; registered PROTOBUF", out), nil
}

// keyValueSchema is Pulsar's KeyValue<String, JSON> schema with INLINE encoding, which the Go
// client does not ship: the schema data is the two schemas, each after its 4-byte length, and
// a value is the key's bytes and the value's bytes, each after its 4-byte length.
type keyValueSchema struct {
	info  pulsar.SchemaInfo
	value pulsar.Schema
}

type kv struct {
	Key   string
	Value reading
}

func newKeyValueSchema() *keyValueSchema {
	value := pulsar.NewJSONSchema(readingAvro, nil)
	data := binary.BigEndian.AppendUint32(nil, 0) // STRING has no schema data
	data = binary.BigEndian.AppendUint32(data, uint32(len(readingAvro)))
	data = append(data, readingAvro...)
	return &keyValueSchema{
		info: pulsar.SchemaInfo{Name: "KeyValue", Type: pulsar.KeyValue, Schema: string(data),
			Properties: map[string]string{
				"key.schema.name": "String", "key.schema.type": "STRING", "key.schema.properties": "{}",
				"value.schema.name": "Reading", "value.schema.type": "JSON", "value.schema.properties": "{}",
				"kv.encoding.type": "INLINE",
			}},
		value: value,
	}
}

func (s *keyValueSchema) Encode(v interface{}) ([]byte, error) {
	pair := v.(*kv)
	val, err := s.value.Encode(&pair.Value)
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(len(pair.Key)))
	out = append(out, pair.Key...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(val)))
	return append(out, val...), nil
}

func (s *keyValueSchema) Decode(data []byte, v interface{}) error {
	pair := v.(*kv)
	if len(data) < 4 {
		return fmt.Errorf("short KeyValue")
	}
	n := binary.BigEndian.Uint32(data)
	pair.Key = string(data[4 : 4+n])
	rest := data[4+n:]
	m := binary.BigEndian.Uint32(rest)
	return json.Unmarshal(rest[4:4+m], &pair.Value)
}

func (s *keyValueSchema) Validate(message []byte) error { return nil }

func (s *keyValueSchema) GetSchemaInfo() *pulsar.SchemaInfo { return &s.info }

func schemaKeyValue(e *env) (string, error) {
	var got kv
	doc, err := roundTrip(e, newKeyValueSchema(), &kv{"id-1", reading{"t4", 5}}, &got)
	if err != nil {
		return "", err
	}
	if err := expect("decoded", got, kv{"id-1", reading{"t4", 5}}); err != nil {
		return "", err
	}
	if err := expect("registered type", doc.Type, "KEY_VALUE"); err != nil {
		return "", err
	}
	if err := expect("encoding", doc.Props["kv.encoding.type"], "INLINE"); err != nil {
		return "", err
	}
	return fmt.Sprintf("decoded %+v; registered KEY_VALUE INLINE", got), nil
}
