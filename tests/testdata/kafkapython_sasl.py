"""Produce and consume through kafka-python over SASL_PLAINTEXT (its
SaslHandshake v0 with unwrapped tokens), or SASL_SSL when a CA file is
given.

usage: kafkapython_sasl.py BOOTSTRAP TOPIC COUNT MECHANISM USER PASSWORD [CAFILE]
"""
import sys
from kafka import KafkaProducer, KafkaConsumer, TopicPartition

bootstrap, topic, count, mech, user, password = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
auth = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mech,
            sasl_plain_username=user, sasl_plain_password=password)
if len(sys.argv) > 7:
    auth.update(security_protocol="SASL_SSL", ssl_cafile=sys.argv[7], ssl_check_hostname=False)
p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **auth)
futs = [p.send(topic, key=b"k", value=("v%d" % i).encode(), partition=0) for i in range(count)]
for f in futs:
    f.get(timeout=30)
p.close()
c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=30000, **auth)
tp = TopicPartition(topic, 0)
c.assign([tp])
c.seek_to_beginning(tp)
seen = 0
for m in c:
    if m.value.decode() != "v%d" % seen:
        sys.exit("record %d: %r" % (seen, m.value))
    seen += 1
    if seen == count:
        break
c.close()
if seen != count:
    sys.exit("read %d of %d" % (seen, count))
print("ok", seen)
