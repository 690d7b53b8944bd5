"""The CI tier's hostile-connection faults (mutated frames, idle and slowloris connections, 100 MiB
size prefixes), in a file of their own so that ``make test``'s ``--dist loadfile`` runs them on the
other worker than the process and disk faults of ``test_fault_ci.py``: each file of the tier is
then a few minutes, not one file of ten."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fault.faults import CI, CONNECTION_FAULTS, FAULTS
from tests.fault.scenario import assert_clean, run_fault

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

SEED = 15


@pytest.mark.parametrize("fault", CONNECTION_FAULTS)
def test_fault(fault: str, tmp_path: Path) -> None:
    result = run_fault(FAULTS[fault](CI), tmp_path, seed=SEED, seconds=CI.seconds)
    print(result.summary())
    assert_clean(result)
