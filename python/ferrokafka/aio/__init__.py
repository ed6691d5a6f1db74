"""ferrokafka for asyncio: clients whose calls never block the event loop.

``from ferrokafka.aio import AIOProducer, AIOConsumer, AIOAdmin``; see
docs/asyncio.md for how completions reach the loop and what cancellation
does.
"""

from ._producer import AIOKafkaProducer, AIOProducer

__all__ = ["AIOProducer", "AIOKafkaProducer"]
