"""ferrokafka for asyncio: clients whose calls never block the event loop.

``from ferrokafka.aio import AIOProducer, AIOConsumer, AIOAdmin``; see
docs/asyncio.md for how completions reach the loop and what cancellation
does.
"""

from ._admin import AIOAdmin
from ._consumer import AIOConsumer, AIOKafkaConsumer, ConsumerRebalanceListener
from ._producer import AIOKafkaProducer, AIOProducer

__all__ = [
    "AIOProducer",
    "AIOConsumer",
    "AIOAdmin",
    "AIOKafkaProducer",
    "AIOKafkaConsumer",
    "ConsumerRebalanceListener",
]
