"""kipling reassign-partitions without a cluster: the JSON files it reads (Kafka's checks and
messages), the JSON and lines it prints, and the throttled-replicas lists it computes."""

from __future__ import annotations

import json

import pytest

from client.admin import PartitionReassignment, TopicPartitionKey
from tools.cli import build_parser
from tools.commands.reassign_partitions import (
    ReassignCommandError,
    _moves,
    _throttled_replicas,
    format_reassignment_json,
    parse_reassignment_json,
    parse_topics_json,
)

T0, T1 = TopicPartitionKey("t", 0), TopicPartitionKey("t", 1)


def test_reassignment_json_round_trips_in_kafkas_format() -> None:
    text = json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": "t", "partition": 1, "replicas": [3, 4], "log_dirs": ["any", "any"]},
                {"topic": "t", "partition": 0, "replicas": [2, 3]},
            ],
        }
    )
    parsed = parse_reassignment_json(text)
    assert parsed == {T1: [3, 4], T0: [2, 3]}
    assert format_reassignment_json(parsed) == (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3],"log_dirs":["any","any"]},'
        '{"topic":"t","partition":1,"replicas":[3,4],"log_dirs":["any","any"]}]}'
    )


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{", "The input string is not a valid JSON"),
        ({"version": 1, "partitions": []}, "Partition reassignment list cannot be empty"),
        (
            {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": []}]},
            "Partition replica list cannot be empty",
        ),
        (
            {
                "version": 1,
                "partitions": [
                    {"topic": "t", "partition": 0, "replicas": [1]},
                    {"topic": "t", "partition": 0, "replicas": [2]},
                ],
            },
            "Partition reassignment contains duplicate topic partitions: t-0",
        ),
        (
            {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1, 2]}]},
            "Partition replica lists may not contain duplicate entries: t-0 contains multiple entries for 1",
        ),
        ({"version": 2, "partitions": []}, "Not supported version field value 2"),
    ],
)
def test_bad_reassignment_files_are_refused_with_kafkas_messages(document: object, message: str) -> None:
    text = document if isinstance(document, str) else json.dumps(document)
    with pytest.raises(ReassignCommandError, match=message):
        parse_reassignment_json(text)


def test_topics_to_move() -> None:
    assert parse_topics_json('{"topics": [{"topic": "a"}, {"topic": "b"}], "version": 1}') == ["a", "b"]
    with pytest.raises(ReassignCommandError, match="duplicate entries: a"):
        parse_topics_json('{"topics": [{"topic": "a"}, {"topic": "a"}], "version": 1}')


def test_throttled_replicas_are_kafkas_sources_and_destinations() -> None:
    ongoing = {T1: PartitionReassignment((5, 6, 1, 2), (5, 6), (1, 2))}
    moves = _moves(ongoing, {T0: [2, 3, 4]}, {T0: [1, 2, 3], T1: [1, 2]})
    assert moves == {T0: ({1, 2, 3}, {4}), T1: ({1, 2}, {5, 6})}
    leader, follower = _throttled_replicas(moves)
    assert leader == {"t": "0:1,0:2,0:3,1:1,1:2"}
    assert follower == {"t": "0:4,1:5,1:6"}


def test_exactly_one_action() -> None:
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["reassign-partitions", "--bootstrap-server", "h:1", "--list", "--verify"])
    args = parser.parse_args(["reassign-partitions", "--bootstrap-server", "h:1", "--list"])
    assert args.list and args.throttle == -1
