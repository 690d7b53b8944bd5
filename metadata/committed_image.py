"""The image of a voter's committed metadata log, caught up when read.

In Kafka every controller, active or standby, replays the committed metadata log (its
MetadataLoader feeds the authorizer and the SCRAM credentials through its publishers), so a login or
an ACL check on any controller's listener sees the cluster's current committed state. A kipling
voter that is not also a broker has no such loader, and only the active controller has a
:class:`~metadata.controller.controller.QuorumController` (whose image also holds records not yet
committed). :class:`CommittedMetadataImage` fills the gap without a task of its own: it replays the
voter's local log lazily, when read, up to the high watermark the voter records on it
(:class:`~metadata.local_copy.LocalMetadataCopy`). A read that finds nothing new costs one int compare,
which matters because it runs for every login and every authorized request.
"""

from __future__ import annotations

import structlog

from metadata.image import MetadataImage
from metadata.local_copy import LocalMetadataCopy, ReplayPosition, replay_committed

__all__ = ["CommittedMetadataImage"]

_log = structlog.get_logger("kipling.committed_image")


class CommittedMetadataImage:
    """A :class:`MetadataImage` of ``local``'s committed log, replayed up to its committed end on read.

    Replay errors never reach the reader: the first is logged, and the image stays the last one that
    replayed (a committed prefix of the log, never a guess). A replay that could not reach the
    committed end (an error, or a log whose start moved past the image with no snapshot to bridge
    it yet) is tried again only once the committed end moves, so a stuck image costs readers
    nothing more than a caught-up one.
    """

    def __init__(self, local: LocalMetadataCopy) -> None:
        self._local = local
        self._image = MetadataImage()
        self._position = ReplayPosition()
        self._stuck_at = -1
        """The committed end at which the last replay fell short of it; -1 when it did not."""
        self._failing = False
        """The last replay failed and was logged: the next failures are not, until one succeeds."""

    @property
    def next_offset(self) -> int:
        """The offset of the next committed batch to apply (what the image holds is below it)."""
        return self._position.next_offset

    def current(self) -> MetadataImage:
        """The image, first caught up with the committed log if it moved since the last read.

        Read-only for the caller, and only until the next read: a snapshot may replace it in place.
        """
        end = self._local.committed_end
        if end > self._position.next_offset and end != self._stuck_at:
            self._catch_up(end)
        return self._image

    def _catch_up(self, end: int) -> None:
        try:
            replay_committed(self._local, self._image, self._position)
        except Exception as exc:  # a login or an ACL check must never fail on a bad replay
            if not self._failing:
                _log.error(
                    "could not replay the committed metadata log; keeping the image replayed so far",
                    next_offset=self._position.next_offset,
                    committed_end=end,
                    error=repr(exc),
                )
            self._failing = True
        else:
            self._failing = False
        self._stuck_at = end if self._position.next_offset < end else -1
