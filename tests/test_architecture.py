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
KIPLING_PACKAGES = {"protocol", "storage", "client", "broker", "follower", "pipeline", "bench"}
THIRD_PARTY_IO = {"uvloop", "prometheus_client", "structlog", "pyspark", "pyarrow"}
COMPRESSION = {"construct", "crc32c", "lz4", "zstandard", "cramjam"}
NETWORK_STDLIB = {"asyncio", "socket", "selectors", "ssl", "socketserver", "http", "urllib"}

# package -> (kipling packages it may import, third-party packages it may import, stdlib it must not import)
RULES: dict[str, tuple[set[str], set[str], set[str]]] = {
    "protocol": (set(), COMPRESSION, NETWORK_STDLIB | {"threading", "multiprocessing", "logging"}),
    "storage": ({"protocol"}, COMPRESSION | {"structlog"}, NETWORK_STDLIB),
    "client": ({"protocol"}, COMPRESSION | {"structlog", "uvloop"}, set()),
    "broker": ({"protocol", "storage", "client"}, COMPRESSION | THIRD_PARTY_IO, set()),
    "follower": ({"protocol", "storage", "client"}, COMPRESSION | THIRD_PARTY_IO - {"pyspark"}, set()),
    "pipeline": ({"protocol", "client", "storage"}, COMPRESSION | THIRD_PARTY_IO, set()),
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _violations(package: str) -> list[str]:
    allowed_kipling, allowed_third_party, banned_stdlib = RULES[package]
    problems = []
    for path in sorted((ROOT / package).rglob("*.py")):
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
