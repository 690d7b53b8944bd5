"""The real client frames of ../shared/reference/frames, paired with their api key and version."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from protocol.api_keys import ApiKey

FRAMES_DIR = Path(__file__).resolve().parents[3] / "shared" / "reference" / "frames"
_NAME = re.compile(r"^(?P<seq>\d+)-(?P<api>[A-Za-z]+)-v(?P<version>\d+)-(?P<kind>req|resp)\.bin$")


@dataclass(frozen=True)
class CapturedFrame:
    path: Path
    api_key: int
    api_version: int
    is_response: bool

    @property
    def frame(self) -> bytes:
        """The frame without its 4-byte size prefix."""
        return self.path.read_bytes()[4:]

    def __str__(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"


def _api_key(camel: str) -> int:
    return ApiKey[re.sub(r"(?<!^)(?=[A-Z])", "_", camel).upper()].value


def captured_frames() -> list[CapturedFrame]:
    frames = []
    for path in sorted(FRAMES_DIR.glob("*/*.bin")):
        m = _NAME.match(path.name)
        if m:
            frames.append(CapturedFrame(path, _api_key(m["api"]), int(m["version"]), m["kind"] == "resp"))
    return frames
