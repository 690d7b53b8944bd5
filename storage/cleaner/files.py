"""Names of the files a cleaning round writes before its owner installs them.

``<base><suffix>.<token>.cleaned`` (``00000000000000000000.log.3f2a9c1e.cleaned``): the token is
the round's, so two rounds over the same log never write the same file, even when the log changes
owner mid-round (the old owner's cleaner may still be writing while the new owner's starts; the new
owner's loader removes the old round's files, as it removes every ``.cleaned`` file). An empty token
gives Kafka's plain ``<base><suffix>.cleaned``.
"""

from __future__ import annotations

from storage.segment import CLEANED_SUFFIX, segment_file_name


def cleaned_file_name(base_offset: int, suffix: str, token: str = "") -> str:
    """The name of a round's cleaned ``suffix`` file (``.log``, ``.txnindex``) for ``base_offset``."""
    middle = f".{token}" if token else ""
    return segment_file_name(base_offset, f"{suffix}{middle}{CLEANED_SUFFIX}")
