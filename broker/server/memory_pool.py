"""Kafka's request memory pool (``queued.max.request.bytes``): a bound on what requests may hold.

Every connection tells the pool what it holds: the partial frame it is receiving (the decoder's
buffer for it, :attr:`protocol.framing.FrameDecoder.in_progress`) and its complete requests, queued
or being answered, until each is answered. When the total reaches the pool's capacity, every
connection stops reading (``pause_reading``); none is failed or dropped, they wait. Reading resumes
for all of them once the pool has a tenth of its capacity free again (the gap keeps 2,000 paused
connections from flapping on every answered request).

Kafka claims a request's whole size from the pool at its size prefix, so a frame that got memory
always finishes. kipling accounts what is actually buffered (a bare 100 MiB prefix claims
nothing, see ``GROWTH_START``), so a frame in progress may need more memory while the pool is out
of it; with only partial frames holding the pool, nothing would ever be answered and release
anything. The way out is Kafka's non-strict pool, which lets one request overdraw it: while the
pool is exhausted and holds no complete request, the connection with the largest partial frame
holds the *overdraft* and keeps reading until that frame is complete. So a frame larger than the
whole pool is still received, and memory stays within the capacity plus one frame
(``socket.request.max.bytes``) plus a socket read per connection. Partial frames that stop
arriving (a peer filling the pool on purpose) are closed by ``kipling.request.receive.timeout.ms``,
whose clock keeps running while their connection waits for the pool; that frees the pool.

Sans-IO: the pool only counts and tells its members to wait or read; connections do the pausing.
"""

from __future__ import annotations

import math
from typing import Protocol

RESUME_FRACTION = 10
"""Reading resumes once 1/RESUME_FRACTION of the capacity is free (Kafka's low-memory threshold)."""


class PoolMember(Protocol):
    """A connection, as the pool sees it."""

    def memory_wait(self, waiting: bool) -> None:
        """Stop reading (``True``) or read again (``False``) for the pool's sake; idempotent."""
        ...


class MemoryPool:
    """The memory that requests received and not yet answered may hold, across all connections.

    ``capacity`` None is Kafka's ``queued.max.request.bytes`` of 0 or less: nothing waits, the
    pool only counts (for the memory-pool gauges).
    """

    def __init__(self, capacity: int | None) -> None:
        if capacity is not None and capacity <= 0:
            raise ValueError(f"capacity must be positive or None, got {capacity}")
        self.capacity = capacity
        self._resume_at = max(1, capacity // RESUME_FRACTION) if capacity is not None else 0
        self._members: dict[PoolMember, tuple[int, int]] = {}
        """Each member's (partial, complete) bytes; a dict keeps joining order for the overdraft."""
        self._partial = 0
        self._complete = 0
        self._blocked = False
        self._overdraft: PoolMember | None = None

    @classmethod
    def of(cls, queued_max_request_bytes: int) -> MemoryPool:
        """The pool ``queued.max.request.bytes`` asks for: 0 or less is unbounded, as in Kafka."""
        return cls(queued_max_request_bytes if queued_max_request_bytes > 0 else None)

    # -- what the gauges show ------------------------------------------------------------------

    @property
    def used(self) -> int:
        """Bytes held by partial frames and by requests not yet answered."""
        return self._partial + self._complete

    @property
    def available(self) -> float:
        """Capacity left, negative while overdrawn; infinite for an unbounded pool (Kafka reports
        Long.MAX_VALUE for its MemoryPool.NONE)."""
        if self.capacity is None:
            return math.inf
        return self.capacity - self.used

    @property
    def blocked(self) -> bool:
        """Whether connections are told to wait (the overdraft holder excepted)."""
        return self._blocked

    @property
    def overdraft(self) -> PoolMember | None:
        return self._overdraft

    # -- members -------------------------------------------------------------------------------

    def join(self, member: PoolMember) -> None:
        """A new connection; it waits at once while the pool is blocked."""
        self._members[member] = (0, 0)
        if self._blocked:
            member.memory_wait(True)

    def leave(self, member: PoolMember) -> None:
        """A closed connection: whatever it held is free again."""
        partial, complete = self._members.pop(member, (0, 0))
        self._partial -= partial
        self._complete -= complete
        if self._overdraft is member:
            self._overdraft = None
        self._rebalance()

    def hold(self, member: PoolMember, partial: int, complete: int) -> None:
        """``member`` now holds ``partial`` bytes of a frame in progress and ``complete`` bytes of
        requests received and not yet answered."""
        held = self._members.get(member)
        if held is None or held == (partial, complete):
            return
        old_partial, old_complete = held
        self._members[member] = (partial, complete)
        self._partial += partial - old_partial
        self._complete += complete - old_complete
        if member is self._overdraft and (complete > old_complete or partial == 0):
            # Its frame is complete: the overdraft has done its job; the member waits like the rest.
            self._overdraft = None
            if self._blocked:
                member.memory_wait(True)
        self._rebalance()

    # -- the rule ------------------------------------------------------------------------------

    def _rebalance(self) -> None:
        if self.capacity is None:
            return
        available = self.capacity - self.used
        if not self._blocked and available <= 0:
            self._set_blocked(True)
        elif self._blocked and available >= self._resume_at:
            self._set_blocked(False)
        if self._blocked and self._overdraft is None and self._complete == 0:
            self._grant_overdraft()

    def _set_blocked(self, blocked: bool) -> None:
        self._blocked = blocked
        if not blocked:
            self._overdraft = None
        for member in list(self._members):
            if member is not self._overdraft:
                member.memory_wait(blocked)

    def _grant_overdraft(self) -> None:
        """Nothing held will be answered and freed: let the largest partial frame finish."""
        largest, size = None, 0
        for member, (partial, _) in self._members.items():
            if partial > size:
                largest, size = member, partial
        if largest is not None:
            self._overdraft = largest
            largest.memory_wait(False)
