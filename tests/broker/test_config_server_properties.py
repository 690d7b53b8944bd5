"""config/server.properties: loads without warnings and documents every key kipling reads."""

from __future__ import annotations

import re
from pathlib import Path

from server_common.config import load_config
from server_common.config.definitions import DEFINITIONS, format_value

SERVER_PROPERTIES = Path(__file__).resolve().parents[2] / "config" / "server.properties"


def test_loads_without_warnings_as_a_single_node() -> None:
    cfg, warnings = load_config(SERVER_PROPERTIES, [])
    assert warnings == []
    assert cfg.is_broker and cfg.is_controller
    assert cfg.offsets_topic_replication_factor == 1


def test_documents_every_defined_key_with_its_default() -> None:
    text = SERVER_PROPERTIES.read_text()
    for definition in DEFINITIONS:
        line = re.search(rf"^#?{re.escape(definition.name)}=(.*)$", text, re.MULTILINE)
        assert line is not None, f"{definition.name} is not documented in server.properties"
        expected = format_value(definition.default)
        if line.group(0).startswith("#") and expected is not None:
            # A commented-out key shows its default, so uncommenting it changes nothing.
            assert line.group(1) == expected, definition.name


def test_uncommenting_every_key_still_loads() -> None:
    text = SERVER_PROPERTIES.read_text()
    shown = re.findall(r"^#([a-z.]+=\S+)$", text, re.MULTILINE)
    assert len(shown) > 40
    cfg, warnings = load_config(SERVER_PROPERTIES, shown)
    # Only the keys that are accepted but ignored draw a warning.
    ignored = sorted(d.name for d in DEFINITIONS if d.ignored)
    assert {"num.io.threads", "num.network.threads", "log.local.retention.ms"} <= set(ignored)
    assert sorted(w.split()[0] for w in warnings) == ignored
    assert cfg.advertised_listeners[0].host == "broker1.example.com"


def test_every_key_has_a_comment_mentioning_its_default() -> None:
    blocks = SERVER_PROPERTIES.read_text().split("\n\n")
    for definition in DEFINITIONS:
        block = next(b for b in blocks if re.search(rf"^#?{re.escape(definition.name)}=", b, re.MULTILINE))
        assert "Default" in block, definition.name
