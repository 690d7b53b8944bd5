"""The `kipling` command-line tools, driven in-process through their real entry point."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
from pathlib import Path

import pytest

from protocol.api import encode_request
from protocol.records import Record, build_batch
from tests.integration.dev_cluster_process import kipling_command
from tests.protocol.frames import captured_frames
from tools.cli import build_parser, main


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "decode-frame" in out and "dump-log" in out


def test_version_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    expected = f"kipling {importlib.metadata.version('kipling')}\n"
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == expected
    # and as the installed script, a process of its own
    done = subprocess.run([*kipling_command(), "--version"], capture_output=True, timeout=60)
    assert (done.returncode, done.stdout.decode()) == (0, expected)


def test_every_subcommand_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    commands = sub.choices
    assert {"topics", "produce", "consume", "groups"} <= set(commands)
    for name in commands:
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0, name
        assert capsys.readouterr().out.startswith(f"usage: kipling {name}"), name


def test_decode_frame_roundtrip_on_every_reference_frame(capsys: pytest.CaptureFixture[str]) -> None:
    frames = captured_frames()
    assert frames
    for captured in frames:
        assert main(["decode-frame", "--roundtrip", str(captured.path)]) == 0, captured
        out = json.loads(capsys.readouterr().out)
        assert out["roundtrip_identical"] is True


def test_decode_frame_summarizes_record_batches(capsys: pytest.CaptureFixture[str]) -> None:
    produce = next(f for f in captured_frames() if f.path.name == "00012-Produce-v9-req.bin")
    assert main(["decode-frame", str(produce.path)]) == 0
    out = json.loads(capsys.readouterr().out)
    records = out["body"]["topic_data"][0]["partition_data"][0]["records"]
    assert records["batches"][0]["crc_valid"] is True
    assert records["batches"][0]["count"] > 0


def test_decode_frame_response_needs_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    response = next(f for f in captured_frames() if f.is_response)
    copy = tmp_path / "frame.bin"
    copy.write_bytes(response.path.read_bytes())
    assert main(["decode-frame", "--response", str(copy)]) == 2
    args = ["--api-key", str(response.api_key), "--api-version", str(response.api_version)]
    assert main(["decode-frame", "--response", *args, "--roundtrip", str(copy)]) == 0


def _framed(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def test_decode_frame_roundtrip_reports_non_canonical_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An over-long varint decodes but cannot re-encode identically: exit status 1."""
    frame = encode_request(18, 3, 1, "c", {"client_software_name": "a", "client_software_version": "b"})
    # the body starts after the header: api key, version, correlation id, client id "c", empty tags
    header_len = 2 + 2 + 4 + 2 + 1 + 1
    body = frame[header_len:]
    assert body[0] == 2  # compact string "a": length 1 + 1
    padded = frame[:header_len] + b"\x82\x00" + body[1:]
    path = tmp_path / "odd.bin"
    path.write_bytes(_framed(padded))
    assert main(["decode-frame", "--roundtrip", str(path)]) == 1
    assert json.loads(capsys.readouterr().out)["roundtrip_identical"] is False


def test_decode_frame_rejects_bad_size_prefix(tmp_path: Path) -> None:
    path = tmp_path / "bad.bin"
    path.write_bytes(b"\x00\x00\x00\x09abc")
    assert main(["decode-frame", str(path)]) == 2


def _segment(tmp_path: Path, batches: int = 5) -> tuple[Path, list[bytes]]:
    parts = []
    offset = 0
    for i in range(batches):
        records = [
            Record(f"value-{i}-{j}".encode(), f"k{j}".encode(), [("h", b"x")], 1000 + j) for j in range(3)
        ]
        parts.append(build_batch(records, base_offset=offset, partition_leader_epoch=1))
        offset += 3
    directory = tmp_path / "topic-0"
    directory.mkdir()
    path = directory / "00000000000000000000.log"
    path.write_bytes(b"".join(parts))
    return path, parts


def test_dump_log_lists_batches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, parts = _segment(tmp_path)
    assert main(["dump-log", "--verify", "--print-records", str(path.parent)]) == 0
    out = capsys.readouterr().out
    assert out.count("baseOffset:") == len(parts)
    assert "crcValid: True" in out
    assert "value: b'value-4-2'" in out


def test_dump_log_verify_finds_a_torn_tail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, parts = _segment(tmp_path)
    whole = path.read_bytes()
    torn_at = sum(len(p) for p in parts[:3]) + 20
    path.write_bytes(whole[:torn_at])
    assert main(["dump-log", "--verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.count("baseOffset:") == 3
    assert f"PROBLEM at position {sum(len(p) for p in parts[:3])}: torn tail" in out


def test_dump_log_verify_finds_a_corrupt_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, parts = _segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(parts[0]) + 70] ^= 0xFF  # inside the second batch's records
    path.write_bytes(bytes(data))
    assert main(["dump-log", "--verify", str(path)]) == 1
    assert f"PROBLEM at position {len(parts[0])}: CRC32C mismatch" in capsys.readouterr().out


def test_dump_log_missing_path(tmp_path: Path) -> None:
    assert main(["dump-log", str(tmp_path / "nope")]) == 2


def test_dump_log_on_a_real_partition_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log written by storage, then torn by cutting its active segment mid-batch."""
    from storage.clock import SystemClock
    from storage.config import LogConfig
    from storage.log import PartitionLog

    directory = tmp_path / "orders-3"
    log = PartitionLog.open(directory, LogConfig(segment_bytes=4096), SystemClock())
    for i in range(40):
        log.append_as_leader(build_batch([Record(b"v" * 100, f"k{i}".encode())]), leader_epoch=2)
    log.close()
    segments = sorted(directory.glob("*.log"))
    assert len(segments) > 1
    assert main(["dump-log", "--verify", str(directory)]) == 0
    assert capsys.readouterr().out.count("partitionLeaderEpoch: 2") == 40
    active = segments[-1]
    active.write_bytes(active.read_bytes()[:-7])
    assert main(["dump-log", "--verify", str(directory)]) == 1
    assert "torn tail" in capsys.readouterr().out
