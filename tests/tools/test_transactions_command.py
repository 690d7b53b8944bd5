"""`kipling transactions`: Kafka's tables, the find-hanging filter, and the argument errors that
need no broker. The commands against a broker are in tests/integration/test_transactions_admin.py."""

from __future__ import annotations

import pytest

from client.admin import (
    PartitionProducers,
    ProducerState,
    TopicPartitionKey,
    TransactionDescription,
    TransactionListing,
)
from protocol.error_codes import ErrorCode
from tools.cli import build_parser, main
from tools.commands.metadata_quorum import pretty_table
from tools.commands.transactions import (
    HANGING_HEADERS,
    OpenTransaction,
    candidate_transactions,
    describe_row,
    hanging_rows,
    hanging_transactions,
    list_rows,
    producer_rows,
)

NOW = 1_700_000_000_000
MINUTE = 60_000
T0 = TopicPartitionKey("t", 0)
T1 = TopicPartitionKey("t", 1)


def producer(pid: int, start: int, last_timestamp: int, coordinator_epoch: int = -1) -> ProducerState:
    return ProducerState(pid, 2, 9, last_timestamp, coordinator_epoch, start)


def test_list_rows_by_broker() -> None:
    listings = {
        2: [TransactionListing("b", 11, "Ongoing")],
        1: [TransactionListing("a", 10, "Empty"), TransactionListing("c", 12, "PrepareCommit")],
    }
    assert list_rows(listings) == [
        ["a", "1", "10", "Empty"],
        ["c", "1", "12", "PrepareCommit"],
        ["b", "2", "11", "Ongoing"],
    ]


def test_pretty_table_is_kafkas() -> None:
    table = pretty_table(["TransactionalId", "Coordinator"], [["a-long-transactional-id", "1"]])
    assert table == "TransactionalId        \tCoordinator\t\na-long-transactional-id\t1          \t\n"


def test_describe_row() -> None:
    running = TransactionDescription(
        "app", ErrorCode.NONE, "Ongoing", 10, 3, 60_000, NOW - 1500, (T0, TopicPartitionKey("u", 2))
    )
    assert describe_row(1, running, NOW) == [
        "1", "app", "10", "3", "Ongoing", "60000", str(NOW - 1500), "1500", "t-0,u-2",
    ]  # fmt: skip
    idle = TransactionDescription("app", ErrorCode.NONE, "Empty", 10, 3, 60_000, -1, ())
    assert describe_row(1, idle, NOW)[5:] == ["60000", "None", "None", ""]


def test_producer_rows() -> None:
    assert producer_rows([producer(7, 42, NOW, 4), producer(8, -1, NOW)]) == [
        ["7", "2", "4", "9", str(NOW), "42"],
        ["8", "2", "-1", "9", str(NOW), "None"],
    ]


def test_find_hanging_filter() -> None:
    old = NOW - 20 * MINUTE
    producers = {
        T0: PartitionProducers(
            ErrorCode.NONE,
            (
                producer(1, 10, old),  # no transactional id has producer 1: hanging
                producer(2, 20, old),  # its transaction includes t-0: not hanging
                producer(3, 30, NOW - MINUTE),  # too recent to be a candidate
                producer(4, -1, old),  # no open transaction
            ),
        ),
        T1: PartitionProducers(
            ErrorCode.NONE,
            (
                producer(2, 5, old),  # producer 2's transaction does not include t-1: hanging
                producer(5, 6, old),  # its transactional id is unknown to the coordinator: hanging
            ),
        ),
    }
    candidates = candidate_transactions(producers, NOW, 15 * MINUTE)
    assert [(c.partition, c.producer.producer_id) for c in candidates] == [(T0, 1), (T0, 2), (T1, 2), (T1, 5)]
    described = TransactionDescription("two", ErrorCode.NONE, "Ongoing", 2, 2, 60_000, old, (T0,))
    hanging = hanging_transactions(candidates, {2: "two", 5: "five"}, {"two": described, "five": None})
    assert [(h.partition, h.producer.producer_id) for h in hanging] == [(T0, 1), (T1, 2), (T1, 5)]
    rows = hanging_rows(hanging[:1], NOW)
    assert rows == [["t", "0", "1", "2", "-1", "10", str(old), "20"]]
    assert len(rows[0]) == len(HANGING_HEADERS)


def test_an_open_transaction_is_a_candidate_only_past_the_timeout() -> None:
    state = producer(1, 10, NOW - 15 * MINUTE)
    at_bound = {T0: PartitionProducers(ErrorCode.NONE, (state,))}
    assert candidate_transactions(at_bound, NOW, 15 * MINUTE) == []
    assert candidate_transactions(at_bound, NOW + 1, 15 * MINUTE) == [OpenTransaction(T0, state)]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["transactions", "--bootstrap-server", "127.0.0.1:1", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["find-hanging"],
            "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the "
            "search",
        ),
        (
            ["find-hanging", "--broker-id", "1", "--partition", "0"],
            "The --partition argument requires --topic",
        ),
        (
            ["abort", "--topic", "t", "--partition", "0"],
            "The transaction to abort must be identified either with --start-offset",
        ),
        (
            ["abort", "--topic", "t", "--partition", "0", "--producer-id", "5"],
            "Missing required argument --producer-epoch",
        ),
        (
            ["abort", "--topic", "t", "--partition", "0", "--producer-id", "5", "--producer-epoch", "1"],
            "Missing required argument --coordinator-epoch",
        ),
    ],
)
def test_argument_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = run(capsys, *args)
    assert (code, out) == (1, "")
    assert err.startswith(message) and err.count("\n") == 1


def test_unreachable_broker_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "list")
    assert (code, out) == (1, "")
    assert err.startswith("Failed to list transactions: ") and err.count("\n") == 1


def test_bootstrap_server_before_or_after_the_sub_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["transactions", "--bootstrap-server", "h:1", "list"])
    after = parser.parse_args(["transactions", "list", "--bootstrap-server", "h:2"])
    assert [str(a) for a in before.bootstrap_server] == ["h:1"]
    assert [str(a) for a in after.bootstrap_server] == ["h:2"]
    missing = parser.parse_args(["transactions", "list"])
    assert missing.bootstrap_server is None
    with pytest.raises(SystemExit):
        missing.func(missing)
