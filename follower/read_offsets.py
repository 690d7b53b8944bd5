"""Telling the broker how far it may read the logs this process follows, and never cutting below it.

A broker serves consumer fetches of the partitions it follows (KIP-392) by reading their files
itself, read-only (storage/read_view.py), up to the high watermark (or last stable offset) this
process last announced for each. The files are this process's: it appends, truncates and deletes
them. :class:`ReadOffsetsAnnouncer` keeps the two in step with two rules:

- **Advances are pushed, batched.** After every fetch round the fetcher hands over the partitions
  the round touched (appended, moved the high watermark or log start offset, truncated, reset);
  those whose :class:`~client.replica_messages.ReadOffsets` differ from what was announced go to the
  broker in one ``read_offsets`` event, so a consumer fetch parked on a followed partition is woken
  by the high watermark moving, never by polling, and an idle partition costs nothing. Partitions
  are announced when added too (before the ``add_partitions`` reply, so the broker reads a new
  follower's log from the start), after a retention pass (their log start offset moves), and after
  the cleaner installed a cleaned segment. The offsets carry the log's segment generation, which
  moves whenever segment files are removed, replaced or cut (retention, the cleaner, truncations):
  the broker then drops the files it holds (deleted ones would stay allocated, and it reads the
  new layout from then on).
- **Cuts below the announced range wait for the broker.** Bytes below an announced high watermark
  never change, except when the log is truncated below it (an unclean election; a replica whose
  log lost committed records): before such a truncation :meth:`ReadOffsetsAnnouncer.fence` sends
  ``fence_reads`` and waits for the broker's answer, by which time the broker reads nothing at or
  above the cut (its reads are synchronous, so none is in progress). Only then is the log cut.
  Retention and the cleaner never change bytes in place (whole files are renamed), so they need no
  fence: an open descriptor keeps its bytes, a reopen by name sees the new files, and the broker
  reads a segment's aborted transactions only from the index that goes with the file it read the
  records from (storage/read_view.py).

While a fence waits, nothing else announces the partition (a retention pass announces every log):
the offsets of the log not cut yet would reach the broker after the fence and raise its bound
above the cut again.

A broker that does not answer in time is asked again, for as long as the channel is open: a broker
paused or stalled past the timeout still reads when it resumes, possibly before it takes the fence
in, and its reads do not check the bytes they copy, so a cut without its answer could expose records
above the follower's high watermark, or bytes of the batches that replaced the cut ones. Only a
closed channel (the broker is gone: nobody reads) lets the truncation go ahead unanswered, and an
error answer (a broker that keeps no followed reads).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import structlog

from client.replica_ipc import IpcClosedError, IpcError
from client.replica_messages import FENCE_READS, READ_OFFSETS, ReadOffsets
from follower.fetch_state import TopicPartition
from follower.replica_log import ReplicaLog

_log = structlog.get_logger(__name__)

SendEvent = Callable[[str, dict[str, Any]], Awaitable[None]]
RequestBroker = Callable[[str, dict[str, Any], float], Awaitable[dict[str, Any]]]
"""(type, body, timeout in seconds) -> the broker's answer (the IPC channel's ``request``)."""

DEFAULT_FENCE_TIMEOUT_S = 30.0


def read_offsets_of(tp: TopicPartition, log: ReplicaLog) -> ReadOffsets:
    """The readable range of one followed log, as the broker is told it."""
    partition_log = log.log
    return ReadOffsets(
        tp[0],
        tp[1],
        partition_log.high_watermark,
        log.last_stable_offset,
        partition_log.log_start_offset,
        partition_log.log_end_offset,
        partition_log.active_segment.base_offset,
        log.segment_generation,
    )


class ReadOffsetsAnnouncer:
    """What the broker was told of each followed log, and the two rules of the module docstring."""

    def __init__(
        self,
        send_event: SendEvent,
        request_broker: RequestBroker | None,
        *,
        fence_timeout_s: float = DEFAULT_FENCE_TIMEOUT_S,
    ) -> None:
        """``request_broker`` None: nobody reads the logs (a test without a broker); no fences."""
        self._send_event = send_event
        self._request_broker = request_broker
        self._fence_timeout_s = fence_timeout_s
        self._announced: dict[TopicPartition, ReadOffsets] = {}
        self._fencing: set[TopicPartition] = set()
        """Partitions whose fence is waiting for the broker: not announced meanwhile."""

    def announced(self, tp: TopicPartition) -> ReadOffsets | None:
        return self._announced.get(tp)

    async def announce(
        self, logs: Mapping[TopicPartition, ReplicaLog], tps: Iterable[TopicPartition]
    ) -> None:
        """Send the changed offsets of ``tps`` (those still followed) in one event, if any changed."""
        rows = []
        for tp in tps:
            log = logs.get(tp)
            if log is None or log.log.closed or tp in self._fencing:
                continue
            offsets = read_offsets_of(tp, log)
            if self._announced.get(tp) != offsets:
                self._announced[tp] = offsets
                rows.append(offsets.to_row())
        if not rows:
            return
        try:
            await self._send_event(READ_OFFSETS, {"partitions": rows})
        except IpcClosedError:
            pass  # the broker is gone: nobody reads
        except Exception as exc:
            _log.warning("could not announce read offsets", partitions=len(rows), error=repr(exc))

    async def fence(self, tp: TopicPartition, offset: int) -> None:
        """Before cutting ``tp``'s log at ``offset``: if that is below what the broker may read,
        have the broker stop reading there first (see the module docstring)."""
        announced = self._announced.get(tp)
        if announced is None or offset >= announced.high_watermark:
            return
        self._announced[tp] = announced.fenced(offset)
        if self._request_broker is None:
            return
        body = {"topic": tp[0], "partition": tp[1], "offset": offset}
        self._fencing.add(tp)
        try:
            while True:
                try:
                    await self._request_broker(FENCE_READS, body, self._fence_timeout_s)
                    break
                except IpcClosedError:
                    return
                except TimeoutError:
                    _log.warning(
                        "the broker did not confirm the read fence in time; asking again before truncating",
                        topic=tp[0],
                        partition=tp[1],
                        offset=offset,
                        timeout_s=self._fence_timeout_s,
                    )
                except IpcError as exc:  # it answered, with an error: it reads nothing it was not told
                    _log.warning(
                        "the broker refused the read fence; truncating anyway",
                        topic=tp[0],
                        partition=tp[1],
                        offset=offset,
                        error=repr(exc),
                    )
                    break
        finally:
            # the caller cuts the log right after this returns, before any other task runs
            self._fencing.discard(tp)
        _log.info(
            "reads fenced before truncating below the announced high watermark",
            topic=tp[0],
            partition=tp[1],
            offset=offset,
            high_watermark=announced.high_watermark,
        )

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """The partitions were handed back: a later add announces them afresh."""
        for tp in tps:
            self._announced.pop(tp, None)


__all__ = ["ReadOffsetsAnnouncer", "read_offsets_of"]
