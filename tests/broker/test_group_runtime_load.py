"""Loading a ``__consumer_offsets`` partition that cannot be read leaves its groups unserved here
(NOT_COORDINATOR), never loaded as empty: that would hand every consumer of those groups "no
committed offset", and they would reset and commit that."""

from __future__ import annotations

import errno
from types import SimpleNamespace
from typing import Any

import pytest

from broker.group_runtime import GroupCoordinatorRuntime
from tests.coordinator.group.helpers import Harness

pytestmark = pytest.mark.timeout(30)


class UnreadableLog:
    log_start_offset = 0
    log_end_offset = 10

    def read(self, offset: int, max_bytes: int) -> Any:
        raise OSError(errno.EIO, "Input/output error")


async def test_an_unreadable_offsets_partition_is_not_loaded_as_empty() -> None:
    harness = Harness(load=False)
    runtime = GroupCoordinatorRuntime(harness.coordinator, {}, lambda listener: [], lambda: None)  # type: ignore[arg-type]
    harness.coordinator.begin_loading(0)

    await runtime._load(SimpleNamespace(index=0, log=UnreadableLog()))  # type: ignore[arg-type]

    assert 0 not in harness.coordinator.owned_partitions
