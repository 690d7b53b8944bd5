"""A minimal producer: one record batch to one partition per call, on one connection.

No batching, partitioning, retries or idempotence: the callers (tests, CLI, the pipeline's sink) decide
what goes to which partition and whether a failed send may be repeated (a timed-out produce may or may
not have been appended, as in Kafka). The batch is built with :func:`protocol.records.build_batch`.
"""

from __future__ import annotations

from collections.abc import Sequence

from client.connection import KafkaConnection
from client.errors import KafkaResponseError, raise_for_error
from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from protocol.records import CompressionType, Record, build_batch

DEFAULT_TIMEOUT_MS = 30_000
VALID_ACKS = (-1, 0, 1)
ZSTD_MIN_PRODUCE_VERSION = 7


class Producer:
    """Send record batches to partitions of the connected (leader) broker."""

    def __init__(
        self,
        connection: KafkaConnection,
        *,
        acks: int = 1,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        compression: CompressionType = CompressionType.NONE,
        transactional_id: str | None = None,
    ) -> None:
        if acks not in VALID_ACKS:
            raise ValueError(f"acks must be one of {VALID_ACKS}, got {acks}")
        self._connection = connection
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.compression = compression
        self._transactional_id = transactional_id

    async def send(self, topic: str, partition: int, records: Sequence[Record | bytes]) -> int | None:
        """Build one batch of ``records`` (bare bytes become values) and send it; see :meth:`send_batch`."""
        batch = build_batch(
            [r if isinstance(r, Record) else Record(r) for r in records], compression=self.compression
        )
        return await self.send_batch(topic, partition, batch)

    async def send_batch(self, topic: str, partition: int, batch: bytes) -> int | None:
        """Append an encoded batch; returns its base offset, or None with acks=0 (no response).

        Raises :class:`~client.errors.KafkaResponseError` with the partition's error. With acks=0 a
        failed append only shows as the broker closing the connection, as in Kafka.
        """
        wanted_min = ZSTD_MIN_PRODUCE_VERSION if self.compression == CompressionType.ZSTD else None
        version = self._connection.version_for(ApiKey.PRODUCE, wanted_min=wanted_min)
        body = {
            "transactional_id": self._transactional_id,
            "acks": self.acks,
            "timeout_ms": self.timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
        }
        if self.acks == 0:
            await self._connection.send_no_response(ApiKey.PRODUCE, version, body)
            return None
        timeout_s = max(self._connection.request_timeout_s, self.timeout_ms / 1000 + 5)
        response = await self._connection.request(ApiKey.PRODUCE, version, body, timeout_s)
        for topic_response in response.responses:
            for p in topic_response.partition_responses:
                if topic_response.name == topic and p.index == partition:
                    raise_for_error(p.error_code, p.error_message, context=f"produce to {topic}-{partition}")
                    return int(p.base_offset)
        raise KafkaResponseError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"no result for {topic}-{partition} in the produce response"
        )


__all__ = ["Producer"]
