"""The import rules of DESIGN.md section 2, checked from the source.

Each kipling package may import only the packages the design allows, so the layering
(protocol ◄ storage ◄ broker/follower, client ◄ follower/pipeline) stays true as code grows.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KIPLING_PACKAGES = {
    "protocol",
    "storage",
    "server_common",
    "client",
    "metadata",
    "coordinator",
    "broker",
    "follower",
    "cleaner",
    "tools",
    "pipeline",
    "security",
    "bench",
}
THIRD_PARTY_IO = {"uvloop", "prometheus_client", "structlog", "pyspark", "pyarrow"}
COMPRESSION = {"construct", "crc32c", "lz4", "zstandard", "cramjam"}
COMPILED = {"numpy", "numba"}
"""The compiled record decoder's (protocol.records.columnar_kernel), used by the pipeline."""
NETWORK_STDLIB = {"asyncio", "socket", "selectors", "ssl", "socketserver", "http", "urllib"}
EVERY_PACKAGE = KIPLING_PACKAGES - {"bench"}

# package -> (kipling packages it may import, third-party packages it may import, stdlib it must not import)
RULES: dict[str, tuple[set[str], set[str], set[str]]] = {
    "protocol": (set(), COMPRESSION | COMPILED, NETWORK_STDLIB | {"threading", "multiprocessing", "logging"}),
    "storage": ({"protocol"}, COMPRESSION | {"structlog"}, NETWORK_STDLIB),
    "server_common": (
        {"protocol", "storage", "security"},
        COMPRESSION | {"structlog"},
        NETWORK_STDLIB - {"asyncio", "socket"},
    ),
    "security": (set(), {"structlog", "cryptography"}, NETWORK_STDLIB - {"ssl"}),
    "client": ({"protocol", "security"}, COMPRESSION | {"structlog", "uvloop"}, set()),
    "metadata": (
        {"protocol", "storage", "server_common", "security"},
        COMPRESSION | {"structlog"},
        NETWORK_STDLIB,
    ),
    "coordinator": (
        {"protocol", "storage", "server_common", "metadata"},
        COMPRESSION | {"structlog"},
        NETWORK_STDLIB,
    ),
    "broker": (
        {"protocol", "storage", "server_common", "client", "metadata", "coordinator", "cleaner", "security"},
        COMPRESSION | THIRD_PARTY_IO - {"pyspark", "pyarrow"},
        set(),
    ),
    "follower": (
        {"protocol", "storage", "client", "cleaner", "security"},
        COMPRESSION | THIRD_PARTY_IO - {"pyspark"},
        set(),
    ),
    "cleaner": ({"protocol", "storage", "client", "security"}, COMPRESSION | {"structlog", "uvloop"}, set()),
    "tools": (EVERY_PACKAGE, COMPRESSION | THIRD_PARTY_IO - {"pyspark", "pyarrow"}, set()),
    "pipeline": (
        {"protocol", "client", "storage", "security"},
        COMPRESSION | THIRD_PARTY_IO | COMPILED,
        set(),
    ),
}


# Narrower rules inside an allowed package: storage may use protocol's records and sentinels only.
SUBMODULE_RULES: dict[str, dict[str, tuple[str, ...]]] = {
    "storage": {"protocol": ("protocol.records", "protocol.sentinels")}
}


def _modules(path: Path) -> set[str]:
    """Fully qualified modules imported by ``path`` (absolute imports only)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def _imports(path: Path) -> set[str]:
    return {module.split(".")[0] for module in _modules(path)}


def _violations(package: str) -> list[str]:
    allowed_kipling, allowed_third_party, banned_stdlib = RULES[package]
    problems = []
    narrower = SUBMODULE_RULES.get(package, {})
    for path in sorted((ROOT / package).rglob("*.py")):
        for module in _modules(path):
            top = module.split(".")[0]
            prefixes = narrower.get(top)
            if prefixes is not None and not any(module == p or module.startswith(p + ".") for p in prefixes):
                allowed = " and ".join(prefixes)
                problems.append(
                    f"{path.relative_to(ROOT)} imports {module}: {package} may use only {allowed}"
                )
        for name in _imports(path):
            where = f"{path.relative_to(ROOT)} imports {name}"
            if name == package:
                continue
            if name in KIPLING_PACKAGES:
                if name not in allowed_kipling:
                    problems.append(f"{where}: {package} may not depend on {name}")
            elif name in sys.stdlib_module_names:
                if name in banned_stdlib:
                    problems.append(f"{where}: {package} must stay free of {name}")
            elif name not in allowed_third_party:
                problems.append(f"{where}: third-party {name} is not allowed in {package}")
    return problems


@pytest.mark.parametrize("package", sorted(RULES))
def test_import_rules(package: str) -> None:
    if not (ROOT / package).is_dir():
        pytest.skip(f"{package}/ does not exist yet")
    assert _violations(package) == []


def test_rules_detect_a_violation(tmp_path: Path) -> None:
    """The checker itself must catch a forbidden import (guards against a vacuous test)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import asyncio\nfrom storage.log import PartitionLog\n")
    assert _imports(bad) == {"asyncio", "storage"}


def test_storage_may_use_only_protocol_records_and_sentinels(tmp_path: Path) -> None:
    """The narrower rule sees full module paths, not just the top-level package."""
    bad = tmp_path / "bad.py"
    bad.write_text("from protocol.errors import DecodeError\nfrom protocol.records import read_header\n")
    assert _modules(bad) == {"protocol.errors", "protocol.records"}
    assert SUBMODULE_RULES["storage"]["protocol"] == ("protocol.records", "protocol.sentinels")


# Idioms that drop a cancellation on a busy machine (client/tasks.py says how); kipling's code uses
# asyncio.timeout and client.tasks.cancel_and_wait instead.
CANCELLATION_HAZARDS = {
    "asyncio.wait_for": "drops a cancel that arrives as the awaitable completes on Python 3.11; "
    "use `async with asyncio.timeout(...)`",
    "suppress(asyncio.CancelledError": "also swallows a cancellation of the caller; "
    "use client.tasks.cancel_and_wait",
}


def _cancellation_hazards(path: Path) -> list[str]:
    """``idiom: why`` for each hazardous idiom the file's text contains."""
    text = path.read_text()
    return [f"{idiom}: {why}" for idiom, why in CANCELLATION_HAZARDS.items() if idiom in text]


def test_no_idiom_that_swallows_cancellation() -> None:
    found = [
        problem
        for package in sorted(KIPLING_PACKAGES)
        if (ROOT / package).is_dir()
        for path in sorted((ROOT / package).rglob("*.py"))
        for problem in (f"{path.relative_to(ROOT)} uses {h}" for h in _cancellation_hazards(path))
    ]
    assert found == []


def test_the_cancellation_check_sees_the_idioms(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("await asyncio.wait_for(x, 1)\nwith contextlib.suppress(asyncio.CancelledError):\n")
    assert len(_cancellation_hazards(bad)) == 2
