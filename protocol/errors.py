"""Exceptions raised by the sans-IO codec.

Every failure to decode bytes surfaces as a subclass of :class:`ProtocolError`, never as
``IndexError``, ``struct.error`` or ``MemoryError``: callers (the broker's connection handler,
the CLI tools) catch one family and decide whether to answer with an error or close.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base of every codec error."""


class DecodeError(ProtocolError):
    """Bytes that do not form a valid value of the expected schema."""


class EncodeError(ProtocolError):
    """A value that cannot be written with the requested schema version."""


class UnknownFieldError(EncodeError):
    """A key given to encode that no version of its struct declares (a misspelt field name).

    Keys of fields that exist only in other versions of the message are accepted silently: a
    handler builds one dict for every version. ``keys`` are the offending keys, ``struct`` the path
    of the struct in the message (``""`` for the message itself, else e.g. ``"topics[].partitions[]"``).
    """

    def __init__(self, message: str, keys: tuple[str, ...] = (), struct: str = "") -> None:
        super().__init__(message)
        self.keys = keys
        self.struct = struct


class FrameTooLargeError(DecodeError):
    """A size prefix larger than the configured maximum (``socket.request.max.bytes``)."""


class UnsupportedVersionError(ProtocolError):
    """An (api key, api version) pair that has no declared schema."""


class CorruptRecordError(DecodeError):
    """A record batch whose CRC, length or layout is wrong."""


class UnsupportedMagicError(DecodeError):
    """A legacy (magic 0 or 1) message set: kipling only speaks record batch v2."""
