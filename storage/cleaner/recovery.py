"""Finishing or undoing an interrupted segment replacement when a partition directory is opened.

The cleaner writes step 1 (:func:`storage.cleaner.cleaner.write_cleaned_segments`) and the log's owner
replaces a group of segments in this order (:meth:`storage.log.PartitionLog.replace_segments`):

1. write ``<base>.log.cleaned`` and ``<base>.txnindex.cleaned`` (always, empty when the segment
   holds no aborted transaction), fsync;
2. rename the transaction index, then the .log, from ``.cleaned`` to ``.swap``; fsync the directory;
3. rename every replaced segment's files to ``.deleted``; fsync the directory;
4. rename ``.txnindex.swap`` then ``.log.swap`` to their final names; fsync the directory;
5. remove the ``.deleted`` files.

So the rules (Kafka's LogLoader.removeTempFilesAndCollectSwapFiles/recover swap segments):

- ``.cleaned`` files are an unfinished step 1 or 2: removed (the old segments are all still there);
- a ``.log.swap`` is complete (it was fsynced before its rename): every segment file whose base offset
  lies in [swap base, the swap's next offset) is removed, the swap's transaction index (``.swap``) is
  renamed into place (when it is no longer there, step 4 already renamed it: the ``.txnindex`` at the
  swap's base is the new one, since step 3 had renamed the old one), stale offset/time indexes at
  its base are removed (rebuilt on open), and the .log.swap is renamed to ``.log``;
- index ``.swap`` files without a ``.log.swap`` and ``.deleted`` files are removed.

When nothing at or after the base of a group's last segment would be retained, the cleaner keeps
the group's last batch (empty), so a swap's next offset always reaches into every segment it
replaces: after recovery the directory holds either
the old segments or the new one, never part of each.
"""

from __future__ import annotations

import os
import pathlib

import structlog

from protocol.records import ProtocolError
from storage.checkpoint import fsync_directory
from storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    parse_base_offset,
    segment_file_name,
    walk_batches,
)
from storage.txn_index import TXN_INDEX_SUFFIX

_log = structlog.get_logger(__name__)
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def next_offset_of(path: pathlib.Path, base: int) -> int:
    """Offset after the last readable batch of a .log file (``base`` when it has none)."""
    next_offset = base
    fd = os.open(path, os.O_RDONLY)
    try:
        for batch in walk_batches(fd, 0, os.fstat(fd).st_size):
            next_offset = batch.last_offset + 1
    except ProtocolError:
        pass
    finally:
        os.close(fd)
    return next_offset


def recover_cleaner_files(directory: pathlib.Path) -> list[int]:
    """Complete or discard an interrupted replacement in ``directory``; returns the swapped-in bases.

    Idempotent: a crash during recovery is recovered by running it again.
    """
    directory = pathlib.Path(directory)
    leftovers = (CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX)
    if not any(name.endswith(leftovers) for name in os.listdir(directory)):
        return []  # the common case: no listing again and no directory fsync (one per log at start-up)
    log_swap_suffix = LOG_SUFFIX + SWAP_SUFFIX
    for path in list(directory.iterdir()):
        if path.name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX)):
            path.unlink(missing_ok=True)
    swaps: list[tuple[int, pathlib.Path]] = []
    for path in directory.iterdir():
        base = parse_base_offset(path.name)
        if base is not None and path.name.endswith(log_swap_suffix):
            swaps.append((base, path))
    swaps.sort()
    for base, swap in swaps:
        end = next_offset_of(swap, base)
        txn_swap = directory / segment_file_name(base, TXN_INDEX_SUFFIX + SWAP_SUFFIX)
        txn_swap_exists = txn_swap.exists()
        for path in list(directory.iterdir()):
            other = parse_base_offset(path.name)
            if other is None or path.name.endswith(SWAP_SUFFIX) or not path.name.endswith(SEGMENT_SUFFIXES):
                continue
            if other == base and path.name.endswith(TXN_INDEX_SUFFIX) and not txn_swap_exists:
                continue  # already the new one
            if base <= other < max(end, base + 1):
                path.unlink(missing_ok=True)
        txn_index = directory / segment_file_name(base, TXN_INDEX_SUFFIX)
        if txn_swap_exists:
            os.replace(txn_swap, txn_index)
        if txn_index.exists() and txn_index.stat().st_size == 0:
            txn_index.unlink()  # kipling keeps a transaction index only when it has entries
        os.replace(swap, directory / segment_file_name(base, LOG_SUFFIX))
        _log.info("completed interrupted segment swap", segment=str(swap), base_offset=base, next_offset=end)
    for path in list(directory.iterdir()):
        if path.name.endswith(SWAP_SUFFIX):
            path.unlink(missing_ok=True)
    fsync_directory(directory)
    return [base for base, _ in swaps]
