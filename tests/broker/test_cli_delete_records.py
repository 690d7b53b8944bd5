"""``kipling delete-records`` without a broker: the offset JSON file's checks (Kafka's messages), one
line on stderr and exit 1; the report lines."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from pathlib import Path

import pytest

from client.admin import TopicPartitionKey
from protocol.error_codes import ErrorCode
from tools.commands.delete_records import (
    DeleteRecordsCommandError,
    delete_records_command,
    parse_offset_json,
    report_lines,
)


def test_parse_offset_json() -> None:
    text = json.dumps(
        {
            "partitions": [
                {"topic": "t", "partition": 0, "offset": 5},
                {"topic": "u", "partition": 2, "offset": -1},
            ],
            "version": 1,
        }
    )
    assert parse_offset_json(text) == {TopicPartitionKey("t", 0): 5, TopicPartitionKey("u", 2): -1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "The input string is not a valid JSON"),
        ('{"partitions": [], "version": 2}', "Not supported version field value 2"),
        ('{"version": 1}', "Missing partitions field"),
        ('{"partitions": [{"topic": "t", "partition": 0}]}', "Missing or invalid offset"),
        ('{"partitions": [{"partition": 0, "offset": 1}]}', "Missing or invalid topic"),
        (
            '{"partitions": [{"topic": "t", "partition": 0, "offset": 1}, '
            '{"topic": "t", "partition": 0, "offset": 2}]}',
            "Offset json file contains duplicate topic partitions: t-0",
        ),
    ],
)
def test_bad_files_are_refused(text: str, message: str) -> None:
    with pytest.raises(DeleteRecordsCommandError, match=message):
        parse_offset_json(text)


def _run(path: Path) -> tuple[int, str, str]:
    args = argparse.Namespace(bootstrap_server=["127.0.0.1:1"], offset_json_file=str(path), timeout_ms=1000)
    out, err = io.StringIO(), io.StringIO()
    code = asyncio.run(delete_records_command(args, out, err))
    return code, out.getvalue(), err.getvalue()


def test_one_line_and_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "offsets.json"
    bad.write_text("[1, 2")
    assert _run(bad) == (1, "", "The input string is not a valid JSON\n")
    code, out, err = _run(tmp_path / "missing.json")
    assert (code, out) == (1, "")
    assert err.startswith("Cannot read the offset JSON file") and err.count("\n") == 1


def test_report_lines() -> None:
    results = {
        TopicPartitionKey("t", 0): (ErrorCode.NONE, 7),
        TopicPartitionKey("t", 1): (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
    }
    assert report_lines(results) == [
        "partition: t-0\tlow_watermark: 7",
        f"partition: t-1\terror: OFFSET_OUT_OF_RANGE: {ErrorCode.OFFSET_OUT_OF_RANGE.description}",
    ]
