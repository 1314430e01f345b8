"""confluent-kafka-python's Protobuf serde against Berth's registry (it
registers schemas as base64 FileDescriptorProtos, with the files they
import as references), into a topic whose values the broker checks.

usage: confluent_schema_registry_protobuf.py BOOTSTRAP REGISTRY_URL TOPIC N
Prints "ok N" when every step held."""
import sys

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

bootstrap, url, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
F = descriptor_pb2.FieldDescriptorProto

# shop/money.proto, imported by shop/order.proto: built at run time, as
# protoc-generated modules would hold them.
money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop", syntax="proto3")
m = money.message_type.add(name="Money")
m.field.add(name="currency", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
m.field.add(name="units", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
order = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3",
                                           dependency=["shop/money.proto"])
o = order.message_type.add(name="Order")
o.field.add(name="id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
o.field.add(name="total", number=2, type=F.TYPE_MESSAGE, type_name=".shop.Money", label=F.LABEL_OPTIONAL)
pool = descriptor_pool.DescriptorPool()
pool.Add(money)
pool.Add(order)
desc = pool.FindMessageTypeByName("shop.Order")
factory = message_factory.MessageFactory(pool)
Order = factory.GetMessageClass(desc) if hasattr(factory, "GetMessageClass") else factory.GetPrototype(desc)

sr = SchemaRegistryClient({"url": url})
ser = ProtobufSerializer(Order, sr)
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
errors = []
for i in range(n):
    msg = Order(id="HC-%d" % (2048 + i))
    msg.total.currency, msg.total.units = "EUR", i
    p.produce(topic, key=msg.id, value=ser(msg, SerializationContext(topic, MessageField.VALUE)),
              on_delivery=lambda err, _m: err and errors.append(err))
p.flush(30)
assert not errors, errors
subjects = sr.get_subjects()
assert topic + "-value" in subjects and "shop/money.proto" in subjects, subjects
latest = sr.get_latest_version(topic + "-value")
assert latest.schema.schema_type == "PROTOBUF" and len(latest.schema.references) == 1, latest.schema.references

de = ProtobufDeserializer(Order)
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-sr-proto", "auto.offset.reset": "earliest"})
c.subscribe([topic])
seen = set()
while len(seen) < n:
    m = c.poll(10)
    if m is None:
        raise SystemExit("timed out with %d of %d" % (len(seen), n))
    if m.error():
        raise SystemExit(str(m.error()))
    got = de(m.value(), SerializationContext(topic, MessageField.VALUE))
    assert got.total.currency == "EUR", got
    seen.add(got.id)
c.close()
print("ok", len(seen))
