"""`kipling decode-frame`: print one captured Kafka frame as JSON, optionally re-encode it."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from protocol.api import decode_request, decode_response, reencode_request, reencode_response, response_spec
from protocol.api_keys import ApiKey
from protocol.describe import describe
from protocol.errors import ProtocolError

_NAME = re.compile(r"-(?P<api>[A-Za-z]+)-v(?P<version>\d+)-(?P<kind>req|resp)\.bin$")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "decode-frame",
        help="print a captured frame (4-byte size prefix + frame) as JSON",
        description="Decode one Kafka frame file (the 4-byte size prefix followed by the frame, as captured) "
        "and print its header and body as JSON, with record batches summarized. Requests carry their api key "
        "and version; for a response pass --response --api-key K --api-version V (or name the file "
        "<seq>-<Api>-v<V>-resp.bin). With --roundtrip, re-encode and report whether the bytes are identical "
        "(exit status 1 if not).",
    )
    p.add_argument("file", type=Path, help="frame file")
    p.add_argument("--response", action="store_true", help="the frame is a response")
    p.add_argument("--api-key", type=int, help="api key of a response frame")
    p.add_argument("--api-version", type=int, help="api version of a response frame")
    p.add_argument("--roundtrip", action="store_true", help="re-encode and compare byte for byte")
    p.set_defaults(func=run)


def _infer_from_name(path: Path) -> tuple[bool, int | None, int | None]:
    m = _NAME.search(path.name)
    if not m:
        return False, None, None
    name = re.sub(r"(?<!^)(?=[A-Z])", "_", m["api"]).upper()
    key = ApiKey[name].value if name in ApiKey.__members__ else None
    return m["kind"] == "resp", key, int(m["version"])


def _read_frame(path: Path) -> bytes:
    raw = path.read_bytes()
    if len(raw) < 4:
        raise ProtocolError(f"{path}: shorter than a size prefix")
    size = int.from_bytes(raw[:4], "big", signed=True)
    if size != len(raw) - 4:
        raise ProtocolError(f"{path}: size prefix says {size} bytes, file holds {len(raw) - 4}")
    return raw[4:]


def _decode(args: argparse.Namespace, frame: bytes) -> tuple[dict[str, Any], bytes]:
    is_response, key, version = _infer_from_name(args.file)
    is_response = args.response or is_response
    key = args.api_key if args.api_key is not None else key
    version = args.api_version if args.api_version is not None else version
    if is_response:
        if key is None or version is None:
            raise ProtocolError("a response needs --api-key and --api-version")
        resp = decode_response(frame, key, version)
        out = {
            "kind": "response",
            "api_key": key,
            "api_version": version,
            "header": dict(resp.header),
            "body": describe(response_spec(key), resp.body),
            "trailing_bytes": len(resp.trailing),
        }
        return out, reencode_response(resp, key, version)
    req = decode_request(frame)
    from protocol.api import request_spec

    out = {
        "kind": "request",
        "api_key": req.api_key,
        "api_name": ApiKey(req.api_key).name if req.api_key in ApiKey._value2member_map_ else None,
        "api_version": req.api_version,
        "header": dict(req.header),
        "body": describe(request_spec(req.api_key), req.body),
        "trailing_bytes": len(req.trailing),
    }
    return out, reencode_request(req)


def run(args: argparse.Namespace) -> int:
    try:
        frame = _read_frame(args.file)
        out, again = _decode(args, frame)
    except (ProtocolError, OSError) as exc:
        sys.stderr.write(f"decode-frame: {exc}\n")
        return 2
    status = 0
    if args.roundtrip:
        identical = again == frame
        out["roundtrip_identical"] = identical
        status = 0 if identical else 1
    sys.stdout.write(json.dumps(out, indent=2, default=str) + "\n")
    return status
