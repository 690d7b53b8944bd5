"""ErrorCode against Kafka's table, cross-checked with kafka-python's independent list."""

from __future__ import annotations

import pickle
import re

import pytest
from kafka import errors as kafka_python_errors

from protocol.error_codes import ErrorCode, KafkaError

# kafka-python decides retriability for its own client; where it departs from Kafka's Errors.java
# the Java classification wins here, because that is what Kafka's clients act on.
RETRIABLE_DIFFERENCES = {
    # Java's CorruptRecordException extends RetriableException (Kafka's protocol docs print
    # "True"); kafka-python's CorruptRecordError derives from its non-retriable base class.
    ErrorCode.CORRUPT_MESSAGE: "Kafka: retriable; kafka-python: not retriable",
}

# kafka-python still uses the names some codes had in older Kafka releases.
KAFKA_PYTHON_OLD_NAMES = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "UNKNOWN",
    ErrorCode.NONE: "NO_ERROR",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_FOR_PARTITION",
    ErrorCode.MESSAGE_TOO_LARGE: "MESSAGE_SIZE_TOO_LARGE",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "INVALID_TOPIC",
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: "INVALID_REPLICATION_ASSIGNMENT",
}


def kafka_python_codes() -> dict[int, type[kafka_python_errors.BrokerResponseError]]:
    return {code: cls for code, cls in kafka_python_errors.kafka_errors.items() if code is not None}


def test_codes_are_contiguous_from_minus_one_to_the_newest() -> None:
    values = [code.value for code in ErrorCode]
    assert values == list(range(-1, 134))
    assert ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133


def test_names_are_upper_snake_case_and_descriptions_present() -> None:
    for code in ErrorCode:
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", code.name), code
        assert code.description and code.description.endswith("."), code
        assert isinstance(code.retriable, bool)


def test_every_code_kafka_python_knows_exists_with_the_same_number() -> None:
    known = kafka_python_codes()
    assert len(known) > 100
    for number, cls in known.items():
        code = ErrorCode(number)
        assert KAFKA_PYTHON_OLD_NAMES.get(code, code.name) == cls.message, number


def test_retriable_agrees_with_kafka_python_except_documented_differences() -> None:
    for number, cls in kafka_python_codes().items():
        code = ErrorCode(number)
        if code in RETRIABLE_DIFFERENCES:
            assert code.retriable != cls.retriable
        else:
            assert code.retriable == cls.retriable, code


@pytest.mark.parametrize(
    ("code", "number", "retriable"),
    [
        (ErrorCode.UNKNOWN_SERVER_ERROR, -1, False),
        (ErrorCode.NONE, 0, False),
        (ErrorCode.OFFSET_OUT_OF_RANGE, 1, False),
        (ErrorCode.CORRUPT_MESSAGE, 2, True),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 3, True),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, 6, True),
        (ErrorCode.REQUEST_TIMED_OUT, 7, True),
        (ErrorCode.MESSAGE_TOO_LARGE, 10, False),
        (ErrorCode.NOT_ENOUGH_REPLICAS, 19, True),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 20, True),
        (ErrorCode.INVALID_REQUIRED_ACKS, 21, False),
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, 29, False),
        (ErrorCode.UNSUPPORTED_VERSION, 35, False),
        (ErrorCode.CONCURRENT_TRANSACTIONS, 51, True),
        (ErrorCode.KAFKA_STORAGE_ERROR, 56, True),
        (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 70, True),
        (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 71, True),
        (ErrorCode.FENCED_LEADER_EPOCH, 74, True),
        (ErrorCode.UNKNOWN_LEADER_EPOCH, 75, True),
        (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, 76, False),
        (ErrorCode.UNKNOWN_TOPIC_ID, 100, True),
        (ErrorCode.INCONSISTENT_TOPIC_ID, 103, True),
        (ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, 106, True),
        (ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE, 109, False),
        (ErrorCode.INVALID_REGULAR_EXPRESSION, 128, False),
        (ErrorCode.REBOOTSTRAP_REQUIRED, 129, False),
        (ErrorCode.SHARE_SESSION_LIMIT_REACHED, 133, True),
    ],
)
def test_codes_the_broker_relies_on(code: ErrorCode, number: int, retriable: bool) -> None:
    """The codes of reference/kafka-behaviour.md §1 plus the newest ones, spelled out."""
    assert code == number
    assert code.retriable is retriable


def test_members_behave_as_ints() -> None:
    assert ErrorCode(6) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ErrorCode.NONE == 0
    assert int(ErrorCode.UNKNOWN_SERVER_ERROR) == -1
    assert ErrorCode.FETCH_SESSION_ID_NOT_FOUND.to_bytes(2, "big", signed=True) == b"\x00\x46"
    assert pickle.loads(pickle.dumps(ErrorCode.FENCED_LEADER_EPOCH)) is ErrorCode.FENCED_LEADER_EPOCH


def test_for_code_falls_back_to_unknown_server_error() -> None:
    assert ErrorCode.for_code(71) is ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert ErrorCode.for_code(32000) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.for_code(-2) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_kafka_error_carries_code_and_message() -> None:
    error = KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "broker 2 leads p0")
    assert error.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert error.message == "broker 2 leads p0"
    assert error.retriable
    assert str(error) == "NOT_LEADER_OR_FOLLOWER (6): broker 2 leads p0"
    assert "NOT_LEADER_OR_FOLLOWER" in repr(error)


def test_kafka_error_defaults_to_the_code_description() -> None:
    error = KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
    assert error.message == ErrorCode.INVALID_REQUIRED_ACKS.description
    assert not error.retriable


def test_kafka_error_round_trips_through_pickle() -> None:
    error = pickle.loads(pickle.dumps(KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "disk gone")))
    assert error.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert error.message == "disk gone"


def test_kafka_error_refuses_none() -> None:
    with pytest.raises(ValueError):
        KafkaError(ErrorCode.NONE)
