"""Random lives of transactional producers against one coordinator, checked against Kafka's rules.

A hypothesis state machine drives a few producers (transactional ids) through InitProducerId,
AddPartitions, EndTxn (transaction versions 0 and 2), timeouts, zombie requests with old producer
identities, failed log writes and the coordinator moving away and back. The in-memory log and
marker sender complete at once; after every step the background work settles. Checked throughout:

* markers are sent only for partitions added to that transaction, and every partition added is
  marked exactly once when its transaction ends, with the commit flag of the way it ended;
* the epochs the coordinator holds for a producer id never decrease, and no epoch it hands out is
  lower than one handed out before for that producer id;
* a zombie (an older identity of a transactional id) never gets a partition added;
* a coordinator that reloads the log holds the same durable state as before.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from coordinator.transaction import TransactionConfig, TransactionState
from protocol import transaction_log as tl
from protocol.error_codes import ErrorCode
from tests.coordinator.transaction.helpers import PARTITIONS, TIMEOUT_MS, Harness
from tests.coordinator.transaction.test_load import durable_view

E = ErrorCode
S = TransactionState
IDS = ("alpha", "beta", "gamma")
TOPIC_PARTITIONS = [(topic, p) for topic in ("x", "y") for p in range(3)]


@dataclass
class Producer:
    transactional_id: str
    producer_id: int = -1
    epoch: int = -1
    version: int = 0
    added: set[tuple[str, int]] = field(default_factory=set)
    """Partitions added (answered NONE) to the transaction not marked yet."""
    identities: list[tuple[int, int]] = field(default_factory=list)
    """Every (producer id, epoch) this producer was handed, oldest first."""


class TransactionLives(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        config = TransactionConfig(
            transaction_state_log_num_partitions=PARTITIONS, transaction_version_level=2
        )
        self.h: Harness = self.loop.run_until_complete(self._harness(config))
        self.producers = {tid: Producer(tid) for tid in IDS}
        self.seen_markers = 0
        self.highest_epoch: dict[int, int] = {}

    @staticmethod
    async def _harness(config: TransactionConfig) -> Harness:
        return Harness(config)

    def teardown(self) -> None:
        self.h.coordinator.shutdown()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()

    def run(self, coro: object) -> object:
        async def step() -> object:
            result = await coro  # type: ignore[misc]
            self.h.log.fail_with = None
            await self.h.settle()
            return result

        result = self.loop.run_until_complete(step())
        self.check_markers()
        return result

    def handed_out(self, producer: Producer, producer_id: int, epoch: int) -> None:
        assert epoch >= self.highest_epoch.get(producer_id, -1), (producer_id, epoch, self.highest_epoch)
        self.highest_epoch[producer_id] = epoch
        producer.producer_id, producer.epoch = producer_id, epoch
        producer.identities.append((producer_id, epoch))

    # -- rules ----------------------------------------------------------------------------------------

    @rule(tid=st.sampled_from(IDS), version=st.sampled_from([0, 2]), fail=st.booleans())
    def init(self, tid: str, version: int, fail: bool) -> None:
        producer = self.producers[tid]
        if fail:
            self.h.log.fail_with = E.NOT_ENOUGH_REPLICAS
        result = self.run(self.h.coordinator.init_producer_id(tid, TIMEOUT_MS))
        assert result.error in (E.NONE, E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_NOT_AVAILABLE), result  # type: ignore[attr-defined]
        if result.error is E.NONE:  # type: ignore[attr-defined]
            producer.version = version
            self.handed_out(producer, result.producer_id, result.producer_epoch)  # type: ignore[attr-defined]

    @rule(
        tid=st.sampled_from(IDS),
        partitions=st.lists(st.sampled_from(TOPIC_PARTITIONS), min_size=1, max_size=3),
        fail=st.booleans(),
    )
    def add(self, tid: str, partitions: list[tuple[str, int]], fail: bool) -> None:
        producer = self.producers[tid]
        if producer.producer_id < 0:
            return
        if fail:
            self.h.log.fail_with = E.NOT_LEADER_OR_FOLLOWER
        errors = self.run(
            self.h.coordinator.add_partitions(
                tid, producer.producer_id, producer.epoch, partitions, transaction_version=producer.version
            )
        )
        for partition, error in errors.items():  # type: ignore[attr-defined]
            if error is E.NONE:
                producer.added.add(partition)

    @rule(tid=st.sampled_from(IDS), commit=st.booleans(), fail=st.booleans())
    def end(self, tid: str, commit: bool, fail: bool) -> None:
        producer = self.producers[tid]
        if producer.producer_id < 0:
            return
        markers_before = len(self.h.markers.requests)
        had_partitions = bool(producer.added)
        if fail:
            self.h.log.fail_with = E.NOT_ENOUGH_REPLICAS
        self.last_end = (tid, commit)
        result = self.run(
            self.h.coordinator.end_txn(
                tid, producer.producer_id, producer.epoch, commit, transaction_version=producer.version
            )
        )
        new = self.h.markers.requests[markers_before:]
        if result.error is E.NONE and had_partitions:  # type: ignore[attr-defined]
            assert [(m.transactional_id, m.commit) for m in new] == [(tid, commit)]
        if result.error is E.NONE and producer.version == 2:  # type: ignore[attr-defined]
            self.handed_out(producer, result.producer_id, result.producer_epoch)  # type: ignore[attr-defined]

    @rule(tid=st.sampled_from(IDS), which=st.integers(min_value=0), commit=st.booleans())
    def zombie(self, tid: str, which: int, commit: bool) -> None:
        """An older identity of the transactional id tries to add a partition: never accepted."""
        producer = self.producers[tid]
        old = [
            identity for identity in producer.identities if identity != (producer.producer_id, producer.epoch)
        ]
        if not old:
            return
        producer_id, epoch = old[which % len(old)]
        errors = self.run(self.h.coordinator.add_partitions(tid, producer_id, epoch, [("x", 0)]))
        assert E.NONE not in errors.values(), (producer_id, epoch, errors)  # type: ignore[attr-defined]
        result = self.run(self.h.coordinator.end_txn(tid, producer_id, epoch, commit, transaction_version=0))
        assert result.error is not E.NONE or epoch == self.h.coordinator.transaction(tid).producer_epoch  # type: ignore[attr-defined, union-attr]

    @rule(ms=st.sampled_from([1, TIMEOUT_MS // 2, TIMEOUT_MS + 1]))
    def time_passes(self, ms: int) -> None:
        self.h.clock.advance(ms)
        self.run(self.h.coordinator.abort_timed_out_transactions())

    @rule()
    def coordinator_moves_away_and_back(self) -> None:
        before = self.durable()
        self.h.reload()
        self.loop.run_until_complete(self.h.settle())
        self.check_markers()
        after = self.durable()
        assert {view for view in after if view[0] in {b[0] for b in before}} == before

    @rule()
    def a_new_coordinator_loads_the_log(self) -> None:
        before = self.durable()
        other = self.h.fresh()
        self.loop.run_until_complete(self.h.settle(other))
        assert {durable_view(md) for md in other.transactions()} >= before
        other.shutdown()

    # -- checks ---------------------------------------------------------------------------------------

    def durable(self) -> set[tuple[object, ...]]:
        """What a reload must give back: every id but those whose in-memory state is knowingly
        ahead of the log, as in Kafka: an id created by an InitProducerId whose write failed
        (epoch -1, never written) and an epoch fence whose write failed (its bump stays)."""
        return {
            durable_view(md)
            for md in self.h.coordinator.transactions()
            if not md.has_failed_epoch_fence and md.producer_epoch >= 0
        }

    def check_markers(self) -> None:
        for request in self.h.markers.requests[self.seen_markers :]:
            producer = self.producers[request.transactional_id]
            assert request.partitions, request
            assert request.partitions == producer.added, (request, producer.added)
            producer.added = set()
            md = self.h.coordinator.transaction(request.transactional_id)
            assert md is not None
            expected = S.COMPLETE_COMMIT if request.commit else S.COMPLETE_ABORT
            assert md.state is expected, (md, request)
        self.seen_markers = len(self.h.markers.requests)

    @invariant()
    def every_added_partition_is_marked_when_the_transaction_ends(self) -> None:
        for producer in self.producers.values():
            md = self.h.coordinator.transaction(producer.transactional_id)
            if md is None or md.state is S.ONGOING:
                continue
            assert not producer.added, (md, producer.added)

    @invariant()
    def epochs_never_decrease(self) -> None:
        for md in self.h.coordinator.transactions():
            assert md.pending_state is None, md
            if md.producer_id in self.highest_epoch:
                assert md.producer_epoch >= self.highest_epoch[md.producer_id], (md, self.highest_epoch)

    @invariant()
    def every_record_decodes(self) -> None:
        for record in self.h.records():
            assert isinstance(tl.decode_key(record.key), tl.TransactionLogKey)
            tl.decode_value(record.value)


TransactionLives.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_transaction_lives = TransactionLives.TestCase
