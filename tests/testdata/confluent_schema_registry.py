"""confluent-kafka-python's SchemaRegistryClient and JSON Schema serde
against Berth's registry, into a topic whose values the broker checks.

usage: confluent_schema_registry.py BOOTSTRAP REGISTRY_URL TOPIC N
Prints "ok N" when every step held."""
import json
import sys

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

bootstrap, url, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
subject = topic + "-value"
sr = SchemaRegistryClient({"url": url})

v1 = json.dumps({"title": "Order", "type": "object",
                 "properties": {"id": {"type": "string"}, "total": {"type": "number"}},
                 "required": ["id", "total"]})
# v2 no longer requires total: a reader of v2 reads v1 data. (Adding a
# property to this open content model would not be backward compatible:
# v1 data may hold that name with any value, as Confluent rules.)
v2 = json.dumps({"title": "Order", "type": "object",
                 "properties": {"id": {"type": "string"}, "total": {"type": "number"}},
                 "required": ["id"]})
# v3 requires a new property: a reader of v3 cannot read v2 data.
v3 = json.dumps({"title": "Order", "type": "object",
                 "properties": {"id": {"type": "string"}, "amount": {"type": "number"}},
                 "required": ["id", "amount"]})

id1 = sr.register_schema(subject, Schema(v1, "JSON"))
id2 = sr.register_schema(subject, Schema(v2, "JSON"))
assert id1 != id2, (id1, id2)
assert sr.register_schema(subject, Schema(v2, "JSON")) == id2, "same schema, new id"
assert not sr.test_compatibility(subject, Schema(v3, "JSON")), "v3 should be incompatible"
try:
    sr.register_schema(subject, Schema(v3, "JSON"))
    raise SystemExit("v3 registered")
except SchemaRegistryError as e:
    assert e.http_status_code == 409, e
latest = sr.get_latest_version(subject)
assert latest.schema_id == id2 and latest.version == 2, latest
assert json.loads(sr.get_schema(id1).schema_str)["title"] == "Order"
assert sr.get_subjects() and subject in sr.get_subjects()
looked = sr.lookup_schema(subject, Schema(v1, "JSON"))
assert looked.schema_id == id1 and looked.version == 1, looked
assert sr.get_compatibility(subject_name=None) == "BACKWARD"
sr.set_compatibility(subject_name=subject, level="FULL")
assert sr.get_compatibility(subject_name=subject) == "FULL"
try:
    sr.get_schema(987654)
    raise SystemExit("unknown id found")
except SchemaRegistryError as e:
    assert e.http_status_code == 404 and e.error_code == 40403, e

ser = JSONSerializer(v2, sr, conf={"auto.register.schemas": False})
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
errors = []


def report(err, _msg):
    if err is not None:
        errors.append(err)


for i in range(n):
    order = {"id": "HC-%d" % (2048 + i), "total": i + 0.5, "currency": "EUR"}
    p.produce(topic, key=order["id"], value=ser(order, SerializationContext(topic, MessageField.VALUE)),
              on_delivery=report)
p.flush(30)
assert not errors, errors

# Raw JSON without the wire format is refused by the broker.
raw = Producer({"bootstrap.servers": bootstrap, "message.send.max.retries": 0})
refused = []
raw.produce(topic, value=b'{"id":"raw","total":1}', on_delivery=lambda err, _m: refused.append(err))
raw.flush(30)
assert refused and refused[0] is not None and refused[0].name() == "INVALID_RECORD", refused

de = JSONDeserializer(v2)
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-sr", "auto.offset.reset": "earliest"})
c.subscribe([topic])
seen = set()
while len(seen) < n:
    m = c.poll(10)
    if m is None:
        raise SystemExit("timed out with %d of %d" % (len(seen), n))
    if m.error():
        raise SystemExit(str(m.error()))
    order = de(m.value(), SerializationContext(topic, MessageField.VALUE))
    assert order["currency"] == "EUR", order
    seen.add(order["id"])
c.close()
print("ok", len(seen))
