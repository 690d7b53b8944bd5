"""The CI tier's disk faults (:mod:`tests.fault.disk`: a full disk on a tmpfs, a corrupted and a
truncated segment), in a file of their own so that ``make test``'s ``--dist loadfile`` can run them
on another worker than the process faults of ``test_fault_ci.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fault.disk import DISK_FAULTS
from tests.fault.faults import CI, FAULTS
from tests.fault.scenario import assert_clean, run_fault

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

SEED = 15


@pytest.mark.parametrize("fault", DISK_FAULTS)
def test_fault(fault: str, tmp_path: Path) -> None:
    if fault.startswith("disk-full") and os.geteuid() != 0:
        pytest.skip(f"{fault} mounts a tmpfs: it needs root (as in CI)")
    result = run_fault(FAULTS[fault](CI), tmp_path, seed=SEED, seconds=CI.seconds)
    print(result.summary())
    assert_clean(result)
