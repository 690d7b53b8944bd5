"""The controller's metadata log, and the one path by which a change reaches it and the image.

:class:`MetadataLog` is what the controller needs from the ``__cluster_metadata`` partition: append a
batch and say where the log ends. The real one appends to the quorum's Raft log in the leader's
epoch (broker/quorum/controller_role.py: RaftMetadataLog); :class:`InMemoryMetadataLog` is the
reference behaviour, used by tests.

:class:`MetadataWriter` is how every controller operation takes effect: append the batch, then apply
it to the image at the offsets the log assigned, then tell the listeners. The image never runs ahead
of the log; the answer to the request waits until a majority of voters holds the batch (the
CommitGate), so what the controller answered survives any failover. If an append fails
the log's content is unknown (a torn write may or may not hold the batch), so the writer refuses all
later writes: the owner must build a new controller from the log, as Kafka's controller resigns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from metadata.image import MetadataDelta, MetadataImage
from metadata.records import MetadataRecord
from protocol.error_codes import ErrorCode, KafkaError

LogEntry = tuple[int, int, MetadataRecord]
"""(offset, epoch, record): one record of the metadata log with the epoch of its batch."""
AppendListener = Callable[[int], None]
"""Called with the last offset of each appended batch."""

_log = structlog.get_logger("kipling.controller.metadata_log")


class MetadataLog(Protocol):
    """The metadata log as the controller writes it."""

    def append(self, records: Sequence[MetadataRecord], epoch: int) -> int:
        """Durably append ``records`` as one batch written at controller ``epoch``.

        Returns the offset of the batch's FIRST record; the records get consecutive offsets. Raises
        if the batch is not durable (the caller then treats the log's content as unknown).
        """
        ...

    @property
    def end_offset(self) -> int:
        """The offset the next appended record will get (0 for an empty log)."""
        ...


class InMemoryMetadataLog:
    """A MetadataLog in a list of (offset, epoch, record), with a real log's invariants.

    A batch must not be empty, and epochs never go back (a write at an older epoch would be a
    deposed controller's). ``entries`` lets a test restart a controller on the same log.
    """

    def __init__(self, entries: Iterable[LogEntry] = ()) -> None:
        self._entries: list[LogEntry] = list(entries)
        for expected, (offset, _, _) in enumerate(self._entries):
            if offset != expected:
                raise ValueError(
                    f"log entries must have consecutive offsets from 0, found {offset} at {expected}"
                )

    @property
    def end_offset(self) -> int:
        return len(self._entries)

    @property
    def last_epoch(self) -> int | None:
        return self._entries[-1][1] if self._entries else None

    def append(self, records: Sequence[MetadataRecord], epoch: int) -> int:
        if not records:
            raise ValueError("a metadata batch holds at least one record")
        last_epoch = self.last_epoch
        if last_epoch is not None and epoch < last_epoch:
            raise ValueError(f"epoch {epoch} is older than the log's last epoch {last_epoch}")
        first = len(self._entries)
        self._entries.extend((first + i, epoch, record) for i, record in enumerate(records))
        return first

    def read(self, start_offset: int = 0) -> list[LogEntry]:
        """Every entry from ``start_offset`` on."""
        return self._entries[max(start_offset, 0) :]

    @property
    def entries(self) -> tuple[LogEntry, ...]:
        return tuple(self._entries)


class ControllerFailedError(Exception):
    """The controller cannot write: an append failed, or the log and the image disagree.

    Build a new controller by replaying the log; this one must not be used again.
    """


@dataclass(frozen=True, slots=True)
class Commit:
    """Where a batch landed and what it changed."""

    first_offset: int
    last_offset: int
    delta: MetadataDelta


MAX_RECORDS_PER_BATCH = 10_000
"""Records per batch of a non-atomic commit (Kafka's QuorumController.MAX_RECORDS_PER_BATCH)."""


class MetadataWriter:
    """Appends a batch, then applies it to the image, then notifies: the controller's only write path."""

    def __init__(self, log: MetadataLog, image: MetadataImage, epoch: int) -> None:
        self._log = log
        self._image = image
        self._epoch = epoch
        self._listeners: list[AppendListener] = []
        self._failure_listeners: list[Callable[[str], None]] = []
        self._failure: str | None = None

    @property
    def epoch(self) -> int:
        """The controller epoch every batch is written with."""
        return self._epoch

    @property
    def next_offset(self) -> int:
        """The offset the next record will get (a broker epoch is its registration record's offset)."""
        return self._log.end_offset

    def on_append(self, listener: AppendListener) -> None:
        self._listeners.append(listener)

    def on_failure(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(reason)`` once, when the writer fails (a full or failed metadata disk)."""
        self._failure_listeners.append(listener)

    def check_writable(self) -> None:
        """Raise ControllerFailedError unless the log and the image are in step and nothing failed."""
        if self._failure is not None:
            raise ControllerFailedError(self._failure)
        if self._log.end_offset != self._image.offset + 1:
            raise ControllerFailedError(
                f"the metadata log ends at {self._log.end_offset} but the image holds offsets up to "
                f"{self._image.offset}: replay the whole log before writing"
            )

    def commit(self, records: Sequence[MetadataRecord], *, atomic: bool = True) -> Commit:
        """Append ``records`` and apply them; an empty list changes nothing.

        ``atomic`` records go in one batch: a reader sees all of them or none (a topic and its
        partitions). Otherwise they go in batches of at most :data:`MAX_RECORDS_PER_BATCH`, as
        Kafka's controller writes a change that is a list of independent ones: fencing the
        leader of 100,000 partitions moves each of them, which in one batch would be megabytes,
        more than a metadata batch may hold.
        """
        self.check_writable()
        if not records:
            return Commit(self.next_offset, self.next_offset - 1, MetadataDelta())
        step = len(records) if atomic else MAX_RECORDS_PER_BATCH
        first = self._log.end_offset
        for start in range(0, len(records), step):
            self._append(records[start : start + step])
        try:
            delta = self._image.apply_batch(((first + i, r) for i, r in enumerate(records)), self._epoch)
        except Exception as exc:
            self._fail(f"the controller's own batch does not replay: {exc}")
            raise
        last = first + len(records) - 1
        self._notify(last)
        return Commit(first, last, delta)

    def _append(self, batch: Sequence[MetadataRecord]) -> None:
        """Append one batch right after the last; any failure fails the writer."""
        expected = self._log.end_offset
        try:
            first = self._log.append(batch, self._epoch)
        except Exception as exc:
            self._fail(f"metadata append failed: {exc!r}")
            if isinstance(exc, KafkaError):
                raise  # NOT_CONTROLLER: the quorum moved on
            # This controller is done (its failure listeners hand the quorum over): the caller
            # retries with the next one, as after any change of controller.
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"metadata append failed: {exc}") from exc
        if first != expected:
            self._fail(f"the metadata log put the batch at offset {first}, expected {expected}")
            raise ControllerFailedError(self._failure)

    def _fail(self, reason: str) -> None:
        self._failure = reason
        _log.error("metadata writer failed; the controller must be rebuilt from the log", reason=reason)
        for listener in list(self._failure_listeners):
            try:
                listener(reason)
            except Exception:
                _log.exception("metadata writer failure listener failed")

    def _notify(self, last_offset: int) -> None:
        for listener in list(self._listeners):
            try:
                listener(last_offset)
            except Exception:
                _log.exception("metadata append listener failed", last_offset=last_offset)
