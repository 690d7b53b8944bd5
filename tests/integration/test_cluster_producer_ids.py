"""Producer ids in a cluster come from the controller: unique across brokers, never reused.

Every broker answers InitProducerId from a block the controller allocated (AllocateProducerIds,
recorded in the metadata log), so two brokers never hand out the same id, and a broker that
restarts gets a fresh block rather than reusing its old one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.api_keys import ApiKey
from protocol.error_codes import ErrorCode
from tests.integration.cluster import Cluster
from tests.integration.wire_client import WireClient

INIT = {"transactional_id": None, "transaction_timeout_ms": 60_000, "producer_id": -1, "producer_epoch": -1}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path).start()
    try:
        yield running
    finally:
        running.stop()


def _producer_ids(port: int, count: int) -> list[int]:
    """``count`` InitProducerId answers from the broker on ``port``, retrying while it loads a block."""
    ids: list[int] = []
    deadline = time.monotonic() + 15
    with WireClient(port) as client:
        while len(ids) < count:
            body = client.request(ApiKey.INIT_PRODUCER_ID, 4, INIT).body
            if body.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                assert time.monotonic() < deadline, "no producer id block arrived"
                time.sleep(0.05)
                continue
            assert body.error_code == ErrorCode.NONE and body.producer_epoch == 0, body
            ids.append(body.producer_id)
    return ids


def test_brokers_hand_out_disjoint_ids_from_controller_blocks(cluster: Cluster) -> None:
    by_broker = {node: _producer_ids(broker.port, 1200) for node, broker in cluster.brokers.items()}
    every = [pid for ids in by_broker.values() for pid in ids]
    assert len(set(every)) == len(every), "a producer id was handed out twice"
    for ids in by_broker.values():
        assert ids == sorted(ids)
    # blocks of 1000 from 0 upwards: the three brokers used at most six blocks between them
    assert max(every) < 6 * 1000

    restarted = cluster.brokers[2]
    before = set(by_broker[2])
    restarted.stop()
    restarted.start()
    after = _producer_ids(restarted.port, 10)
    assert not set(after) & set(every), "a restarted broker reused ids"
    assert min(after) > max(before)
