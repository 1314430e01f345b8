"""Consume in a consumer group with kafka-python and commit synchronously.

usage: kafkapython_group.py BOOTSTRAP TOPIC GROUP COUNT
"""
import sys
from kafka import KafkaConsumer

bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False, consumer_timeout_ms=30000, session_timeout_ms=10000)
seen = 0
for m in c:
    seen += 1
    if seen == count:
        break
c.commit()
c.close()
if seen != count:
    sys.exit("read %d of %d" % (seen, count))
print("ok", seen)
