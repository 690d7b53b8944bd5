"""A byte range of a segment file: what a log read hands to the network layer.

Reads never copy record bytes into Python objects until the response is written: the connection
reads the slice then (``pread``, in the tick it writes the response) and the codec only counts its
length. A slice names the file, never a descriptor: the file pool (storage/file_pool.py) may close
the descriptor between the read and the write, and the slice's file opens it again by name.
"""

from __future__ import annotations

from typing import NamedTuple

from storage.file_pool import PooledFile


class FileSlice(NamedTuple):
    """``length`` bytes of ``file`` starting at ``position``; always whole record batches."""

    file: PooledFile
    position: int
    length: int

    def read_bytes(self) -> bytes:
        """Copy the slice out of the file (pread: the file offset is left alone)."""
        return self.file.pread(self.length, self.position)
