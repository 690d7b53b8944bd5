"""A byte range of an open segment file: what a log read hands to the network layer.

Reads never copy record bytes into Python objects: the fetch path writes the slice to the socket
with ``os.sendfile`` or ``os.pread`` on ``file.fileno()``. :meth:`FileSlice.read_bytes` exists for
tests, tools and the follower's local reads, which do need the bytes.
"""

from __future__ import annotations

import os
from typing import BinaryIO, NamedTuple


class FileSlice(NamedTuple):
    """``length`` bytes of ``file`` starting at ``position``; always whole record batches."""

    file: BinaryIO
    position: int
    length: int

    def read_bytes(self) -> bytes:
        """Copy the slice out of the file (pread: the file offset is left alone)."""
        return os.pread(self.file.fileno(), self.length, self.position)
