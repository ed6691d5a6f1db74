"""A kafka-python program moved to ferrokafka by changing one line: the import.

Everything in ``run()`` is kafka-python 3.0 code, unchanged; swap the import
back to ``from kafka import ...`` and it runs on kafka-python. The lines under
``if __name__ == "__main__"`` only start a local broker (Tansu, through
``ferrokafka.testing``) when no ``--bootstrap`` is given.

    python examples/migrate_kafka_python.py [--bootstrap host:port]
"""

import argparse
import json
import uuid

# from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
# from kafka.errors import KafkaError, TopicAlreadyExistsError
from ferrokafka.compat.kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from ferrokafka.compat.kafka.errors import KafkaError, TopicAlreadyExistsError


def run(bootstrap: str) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1}})
    try:
        admin.create_topics([topic])
    except TopicAlreadyExistsError as e:
        print("as expected:", e)

    producer = KafkaProducer(bootstrap_servers=bootstrap,
                             key_serializer=str.encode,
                             value_serializer=lambda v: json.dumps(v).encode("utf-8"),
                             acks="all", linger_ms=5)
    meta = producer.send(topic, key="order-1", value={"item": "book", "qty": 1}).get(timeout=10)
    print(f"first record at {meta.topic}[{meta.partition}] offset {meta.offset}")

    def on_sent(md):
        print(f"delivered {md.topic}[{md.partition}]@{md.offset}")

    def on_error(exc):
        print("delivery failed:", exc)

    for i in range(2, 6):
        producer.send(topic, key=f"order-{i}", value={"item": "pen", "qty": i}) \
            .add_callback(on_sent).add_errback(on_error)
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"billing-{topic}",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=10000,
                             key_deserializer=bytes.decode,
                             value_deserializer=lambda b: json.loads(b.decode("utf-8")))
    total = 0
    for record in consumer:  # stops after 10 s without a record (the first wait includes joining the group)
        total += record.value["qty"]
        print(f"{record.key}: {record.value} (partition {record.partition}, offset {record.offset})")
    consumer.commit()
    print("quantity ordered:", total)
    for tp in sorted(consumer.assignment()):
        print(f"{tp}: committed {consumer.committed(tp)}, end {consumer.end_offsets([tp])[tp]}")

    # Read partition 0 again from the start, with poll().
    consumer.unsubscribe()
    tp0 = TopicPartition(topic, 0)
    consumer.assign([tp0])
    consumer.seek_to_beginning(tp0)
    batch = consumer.poll(timeout_ms=2000, max_records=10)
    print("partition 0 again:", [r.key for r in batch.get(tp0, [])])
    consumer.close()

    try:
        admin.delete_topics([topic])
    except KafkaError as e:
        print("could not delete the topic:", e)
    admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", help="host:port of a broker (default: start a local one)")
    args = parser.parse_args()
    if args.bootstrap:
        run(args.bootstrap)
    else:
        from ferrokafka.testing import EmbeddedBroker

        with EmbeddedBroker() as broker:
            run(broker.bootstrap_servers)
