"""The baselines of the Kafka benchmark, each a small program run as its own process.

Each reads ``expected`` messages of a topic from the beginning and prints one JSON line:
{"messages": n, "seconds": time from its first record to its last}.
"""

_KAFKA_PYTHON = """
import json, sys, time, orjson
from kafka import KafkaConsumer, KafkaProducer
bootstrap, topic, expected = sys.argv[1], sys.argv[2], int(sys.argv[3])
consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                         enable_auto_commit=False, max_poll_records=2000, fetch_max_bytes=64 << 20)
producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=1 << 20) if RELAY else None
seen, first = 0, None
while seen < expected:
    for records in consumer.poll(timeout_ms=500).values():
        first = first or time.perf_counter()
        for record in records:
            value = orjson.loads(record.value)
            if RELAY:
                producer.send(topic + ".relay", orjson.dumps({"id": value.get("id"), "offset": record.offset}),
                              record.key)
        seen += len(records)
if RELAY:
    producer.flush()
print(json.dumps({"messages": seen, "seconds": time.perf_counter() - first}))
"""

KAFKA_PYTHON_READER = "RELAY = False\n" + _KAFKA_PYTHON  # read + orjson
KAFKA_PYTHON_RELAY = "RELAY = True\n" + _KAFKA_PYTHON  # read + orjson + produce one small JSON per message

_CONFLUENT = """
import json, sys, time, uuid, orjson
from confluent_kafka import Consumer, Producer
bootstrap, topic, expected = sys.argv[1], sys.argv[2], int(sys.argv[3])
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "fetch.max.bytes": 64 << 20})
producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.messages": 1000000}) \
    if RELAY else None
consumer.subscribe([topic])
seen, first = 0, None
while seen < expected:
    messages = consumer.consume(num_messages=2000, timeout=0.5)
    if messages:
        first = first or time.perf_counter()
    for message in messages:
        if message.error() is None:
            value = decode(message)
            if RELAY:
                producer.produce(topic + ".relay", orjson.dumps({"id": value.get("id"), "offset": message.offset()}),
                                 message.key())
            seen += 1
    if RELAY:
        producer.poll(0)
if RELAY:
    producer.flush()
print(json.dumps({"messages": seen, "seconds": time.perf_counter() - first}))
"""

_JSON = """
import orjson
def decode(message):
    return orjson.loads(message.value())
"""
# Avro records of a Schema Registry (its URL in NBSTREAM_BENCH_REGISTRY), read by confluent-kafka's own
# AvroDeserializer (fastavro), each by its writer schema, fetched once.
_AVRO = """
import os
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
_deserializer = AvroDeserializer(SchemaRegistryClient({"url": os.environ["NBSTREAM_BENCH_REGISTRY"]}))
def decode(message):
    return _deserializer(message.value(), SerializationContext(message.topic(), MessageField.VALUE))
"""

CONFLUENT_READER = "RELAY = False\n" + _JSON + _CONFLUENT  # read + orjson
CONFLUENT_RELAY = "RELAY = True\n" + _JSON + _CONFLUENT  # read + orjson + produce one small JSON per message
AVRO_RELAY = "RELAY = True\n" + _AVRO + _CONFLUENT  # read + AvroDeserializer + produce one small JSON per message
