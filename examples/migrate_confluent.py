"""A confluent-kafka program running on ferrokafka.

Everything in `run()` is plain confluent-kafka code; the ONLY change made to
switch it to ferrokafka are the two import lines below (they were
`import confluent_kafka` and `from confluent_kafka.admin import ...`). Run it with `python examples/migrate_confluent.py`:
with no BOOTSTRAP_SERVERS in the environment it starts ferrokafka's embedded
test broker (ferrokafka.testing.EmbeddedBroker) and uses that.
"""

from __future__ import annotations

import os
import sys
import uuid

# The two changed lines (were: `import confluent_kafka`, `from confluent_kafka.admin import ...`):
import ferrokafka.compat.confluent_kafka as confluent_kafka
from ferrokafka.compat.confluent_kafka.admin import AdminClient, NewTopic


def run(bootstrap_servers: str) -> int:
    topic = "orders-" + uuid.uuid4().hex[:8]

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    for t, f in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)]).items():
        f.result()
        print(f"created topic {t}")

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap_servers,
        "linger.ms": 10,
        "acks": "all",
        "compression.type": "lz4",
    })
    delivered = []

    def on_delivery(err, msg):
        if err is not None:
            print(f"delivery failed: {err}", file=sys.stderr)
        else:
            delivered.append((msg.partition(), msg.offset()))

    for i in range(30):
        while True:
            try:
                producer.produce(topic, key=f"customer-{i % 5}", value=f"order {i}",
                                 headers={"source": "example"}, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full: serve delivery reports
        producer.poll(0)
    remaining = producer.flush(30)
    print(f"delivered {len(delivered)} messages, {remaining} left in the queue")

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap_servers,
        "group.id": "example-" + topic,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    consumer.subscribe([topic], on_assign=lambda c, parts: print(f"assigned {sorted(p.partition for p in parts)}"))
    per_key = {}
    at_end = set()
    while len(at_end) < 3:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
                continue
            raise confluent_kafka.KafkaException(msg.error())
        per_key.setdefault(msg.key().decode(), []).append(msg.value().decode())
        consumer.commit(message=msg, asynchronous=False)
    consumer.close()

    for key in sorted(per_key):
        print(f"{key}: {len(per_key[key])} orders, first {per_key[key][0]!r}")
    total = sum(len(v) for v in per_key.values())
    print(f"consumed {total} messages")
    return 0 if total == 30 and remaining == 0 else 1


if __name__ == "__main__":
    bs = os.environ.get("BOOTSTRAP_SERVERS")
    if bs:
        sys.exit(run(bs))
    from ferrokafka.testing import EmbeddedBroker

    with EmbeddedBroker() as broker:
        sys.exit(run(broker.bootstrap_servers))
