"""The fault suite's network partition (CI tier): a partition leader isolated from the other nodes,
first from its followers only, then from the controllers too, inside ~45 s of workload. It runs in
a network namespace of its own (:mod:`tests.fault.partition`), judged by the same checker."""

from __future__ import annotations

import pytest

from tests.fault.faults import CI
from tests.fault.partition import run_isolated, unavailable
from tests.fault.scenario import assert_clean

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


def test_partition_isolating_a_leader_loses_nothing() -> None:
    reason = unavailable()
    if reason is not None:
        pytest.skip(f"network partition fault: {reason}")
    result = run_isolated(seed=15, seconds=CI.seconds, timeout_s=400)
    print(result.report())
    assert_clean(result)
