"""Replacing a listener's certificate without a restart (Kafka's dynamic listener SSL config).

An operator alters ``listener.name.<listener>.ssl.keystore.location`` (or another keystore key of
:data:`~server_common.config.dynamic.DYNAMIC_LISTENER_KEYS`) for one broker id, with
``kipling configs --alter --entity-type brokers --entity-name <id>`` or any admin client; the
controller writes the ConfigRecord and every broker replays it. This broker then loads the new key
and certificate chain into the listener's live TLS context: connections accepted from then on
present the new certificate, open ones keep theirs (OpenSSL's contexts work that way, and so do
Kafka's reconfigured SSL engine factories). A keystore that does not load is logged and the
listener keeps its certificate; the broker keeps running.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Mapping
from typing import Any

import structlog

from metadata.image import MetadataDelta, MetadataImage
from security.tls import SslSettings, TlsConfigError
from server_common.config.dynamic import dynamic_listener_key

log = structlog.get_logger("kipling.tls")


class ListenerKeystores:
    """The TLS listeners of this broker, their static keystores, and the dynamic overrides applied."""

    def __init__(self, node_id: int) -> None:
        self._node_id = str(node_id)
        self._contexts: dict[str, tuple[SslSettings, ssl.SSLContext]] = {}
        self._applied: dict[str, SslSettings] = {}

    def add(self, listener: str, settings: SslSettings, context: ssl.SSLContext) -> None:
        """A TLS listener: its static settings and the live context its server accepts with."""
        self._contexts[listener] = (settings, context)
        self._applied[listener] = settings

    async def apply(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if self._node_id in delta.broker_configs_changed:
            self.apply_image(image)

    def apply_image(self, image: MetadataImage) -> None:
        """Load every listener keystore whose effective settings differ from what is loaded."""
        overrides: dict[str, dict[str, str]] = {}
        for key, value in image.broker_configs(self._node_id).items():
            found = dynamic_listener_key(key)
            if found is not None:
                overrides.setdefault(found[0], {})[found[1]] = value
        for listener, (static, context) in self._contexts.items():
            wanted = _with_overrides(static, overrides.get(listener, {}))
            if wanted == self._applied[listener]:
                continue
            try:
                # A key and chain that do not go together fail inside OpenSSL after it dropped the
                # context's old pair: try them on a throwaway context first, so a bad keystore
                # leaves the listener serving its old certificate.
                wanted.load_keystore(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
                wanted.load_keystore(context)
            except (TlsConfigError, OSError, ssl.SSLError) as exc:
                log.error(
                    "listener keystore not replaced: it does not load", listener=listener, error=str(exc)
                )
                continue
            self._applied[listener] = wanted
            log.info("listener keystore replaced", listener=listener, keystore=wanted.keystore_location)


def _with_overrides(static: SslSettings, overrides: Mapping[str, str]) -> SslSettings:
    """``ssl.keystore.location`` → the ``keystore_location`` field, and so on."""
    fields: dict[str, Any] = {key.replace("ssl.", "", 1).replace(".", "_"): v for key, v in overrides.items()}
    return dataclasses.replace(static, **fields)
