"""The request memory pool (queued.max.request.bytes): who waits, when reading resumes, and the
overdraft that lets one frame through when only partial frames hold the pool."""

from __future__ import annotations

import math

import pytest

from broker.server.memory_pool import MemoryPool

pytestmark = pytest.mark.timeout(10)


class Member:
    def __init__(self, name: str) -> None:
        self.name = name
        self.waiting = False

    def memory_wait(self, waiting: bool) -> None:
        self.waiting = waiting

    def __repr__(self) -> str:
        return self.name


def members(pool: MemoryPool, count: int) -> list[Member]:
    joined = [Member(f"m{i}") for i in range(count)]
    for member in joined:
        pool.join(member)
    return joined


def test_used_and_available_follow_what_members_hold() -> None:
    pool = MemoryPool(1000)
    a, b = members(pool, 2)
    pool.hold(a, 100, 0)
    pool.hold(b, 50, 200)
    assert (pool.used, pool.available) == (350, 650)
    pool.hold(b, 0, 200)
    assert pool.used == 300
    pool.leave(a)
    pool.leave(b)
    assert (pool.used, pool.available) == (0, 1000)


def test_an_exhausted_pool_makes_every_member_wait_and_new_ones_too() -> None:
    pool = MemoryPool(1000)
    a, b, c = members(pool, 3)
    pool.hold(a, 0, 600)
    assert not any(m.waiting for m in (a, b, c))
    pool.hold(b, 0, 400)
    assert pool.blocked
    assert all(m.waiting for m in (a, b, c))
    late = Member("late")
    pool.join(late)
    assert late.waiting


def test_reading_resumes_only_once_a_tenth_of_the_pool_is_free() -> None:
    pool = MemoryPool(1000)
    a, b = members(pool, 2)
    pool.hold(a, 0, 500)
    pool.hold(b, 0, 500)
    pool.hold(a, 0, 450)  # 50 free: not enough
    assert a.waiting and b.waiting
    pool.hold(a, 0, 400)  # 100 free
    assert not a.waiting and not b.waiting
    assert not pool.blocked


def test_partial_frames_alone_get_the_largest_one_an_overdraft() -> None:
    pool = MemoryPool(1000)
    small, large, idle = members(pool, 3)
    pool.hold(small, 300, 0)
    pool.hold(large, 700, 0)
    # Nothing complete will ever be answered: the largest partial frame may finish.
    assert pool.overdraft is large
    assert not large.waiting and small.waiting and idle.waiting
    pool.hold(large, 5000, 0)  # it overdraws the pool while it arrives
    assert pool.available == 1000 - 5300
    assert pool.overdraft is large and not large.waiting
    pool.hold(large, 0, 5000)  # complete: the overdraft ends, it waits like the rest
    assert pool.overdraft is None and large.waiting
    pool.hold(large, 0, 0)  # answered: 700 free
    assert not any(m.waiting for m in (small, large, idle))


def test_no_overdraft_while_complete_requests_will_free_memory() -> None:
    pool = MemoryPool(1000)
    queued, partial = members(pool, 2)
    pool.hold(queued, 0, 500)
    pool.hold(partial, 600, 0)
    assert pool.blocked and pool.overdraft is None
    pool.hold(queued, 0, 0)  # answered; 400 free, partial still waits for a tenth...
    assert pool.overdraft is None and not partial.waiting


def test_a_frame_larger_than_the_whole_pool_is_received() -> None:
    pool = MemoryPool(100)
    (member,) = members(pool, 1)
    pool.hold(member, 200, 0)
    assert pool.overdraft is member and not member.waiting
    pool.hold(member, 0, 1000)
    assert member.waiting
    pool.hold(member, 0, 0)
    assert not member.waiting and pool.used == 0


def test_a_leaving_overdraft_holder_passes_it_on() -> None:
    pool = MemoryPool(1000)
    a, b = members(pool, 2)
    pool.hold(a, 600, 0)
    pool.hold(b, 500, 0)
    assert pool.overdraft is a
    pool.leave(a)
    # 500 used, 500 free: everyone reads again
    assert not b.waiting and not pool.blocked
    pool.hold(b, 950, 0)
    c = Member("c")
    pool.join(c)
    pool.hold(c, 100, 0)
    assert pool.overdraft is b
    pool.leave(b)
    assert not c.waiting


def test_unbounded_pool_only_counts() -> None:
    pool = MemoryPool.of(-1)
    (member,) = members(pool, 1)
    pool.hold(member, 10**9, 10**9)
    assert not member.waiting and pool.used == 2 * 10**9 and pool.available == math.inf
    assert MemoryPool.of(0).capacity is None
    assert MemoryPool.of(5).capacity == 5


def test_holding_after_leaving_changes_nothing() -> None:
    pool = MemoryPool(1000)
    (member,) = members(pool, 1)
    pool.leave(member)
    pool.hold(member, 500, 500)
    assert pool.used == 0
