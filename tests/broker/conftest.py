"""Fixtures shared by the broker package's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    """The CLI tools configure structlog as a command-line process does (``tools.cli.main`` runs
    in-process in these tests); each test gets the session's configuration back afterwards."""
    configured, saved = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()
