"""The fault suite's CI tier: one test per fault, each inside ~45 s of workload on its own 3-voter
cluster, judged by :mod:`tests.fault.checker` (nothing acknowledged lost, no duplicate, nothing read
at another offset than acknowledged or going backwards, no broker crash).

Every wait is on an event with a generous bound (two pytest workers share two cores with six broker
processes); the longest time without an ack is printed per partition, and only bounded loosely.
The hostile-connection faults are in ``test_fault_ci_connections.py``, the disk faults in
``test_fault_ci_disk.py`` (a file each, so ``--dist loadfile`` spreads them over the workers).
The long tier, minutes per fault and seed, is ``python -m tests.fault.long_tier``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fault.disk import DISK_FAULTS
from tests.fault.faults import CI, CONNECTION_FAULTS, FAULTS
from tests.fault.scenario import assert_clean, run_fault

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

SEED = 15


@pytest.mark.parametrize("fault", [f for f in FAULTS if f not in CONNECTION_FAULTS and f not in DISK_FAULTS])
def test_fault(fault: str, tmp_path: Path) -> None:
    result = run_fault(FAULTS[fault](CI), tmp_path, seed=SEED, seconds=CI.seconds)
    print(result.summary())
    assert_clean(result)
