"""``meta.properties`` in every log dir: which cluster and node the data belongs to.

Kafka writes ``version``, ``cluster.id`` and ``node.id`` there when it formats a log dir and
refuses to start on a dir that belongs to another node or cluster: pointing two brokers at one
disk, or a broker at another cluster's data, must fail loudly rather than mix logs.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from server_common.config.properties import PropertiesError, read_properties_file
from storage.checkpoint import write_atomically

META_PROPERTIES = "meta.properties"
_RESERVED_UUIDS = (0, 1)
"""Kafka's reserved UUIDs: ZERO_UUID and ONE_UUID (the metadata topic's id)."""


class MetaPropertiesError(Exception):
    """A log dir that belongs to another node or cluster, or an unreadable meta.properties.

    ``key`` is the config key whose value contradicts the log dir (``node.id``, ``cluster.id``),
    or ``log.dirs`` when the file itself is the problem.
    """

    def __init__(self, message: str, key: str = "log.dirs") -> None:
        super().__init__(message)
        self.key = key


def new_cluster_id() -> str:
    """A random cluster id in Kafka's format (a URL-safe base64 UUID without padding).

    As Kafka's ``Uuid.randomUuid`` (KAFKA-20072), never the zero or the metadata topic's reserved
    UUID and never one with a ``-``: an id starting with one would read as an option on a command
    line (``kipling storage format --cluster-id -x...``)."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if "-" not in text and int.from_bytes(raw, "big") not in _RESERVED_UUIDS:
            return text


def check_meta_properties(
    log_dirs: list[Path], node_id: int, configured_cluster_id: str | None
) -> tuple[str | None, list[Path]]:
    """Check the meta.properties of ``log_dirs`` against each other, ``node_id`` and
    ``configured_cluster_id``; returns the cluster id they name (None when no file and no config
    names one) and the dirs that have one (formatted). Raises :class:`MetaPropertiesError`."""
    found: dict[Path, dict[str, str]] = {}
    for directory in log_dirs:
        path = directory / META_PROPERTIES
        if path.exists():
            try:
                found[directory] = read_properties_file(path)
            except (OSError, PropertiesError) as exc:
                raise MetaPropertiesError(f"cannot read {path}: {exc}") from exc
    for directory, props in found.items():
        found_id = props.get("cluster.id")
        if configured_cluster_id and found_id not in (None, configured_cluster_id):
            where = directory / META_PROPERTIES
            raise MetaPropertiesError(
                f"{where} belongs to cluster {found_id}, not cluster.id={configured_cluster_id}",
                key="cluster.id",
            )
    cluster_ids = {props["cluster.id"] for props in found.values() if "cluster.id" in props}
    if configured_cluster_id:
        cluster_ids.add(configured_cluster_id)
    if len(cluster_ids) > 1:
        raise MetaPropertiesError(f"log dirs belong to different clusters: {sorted(cluster_ids)}")
    for directory, props in found.items():
        if props.get("node.id") not in (None, str(node_id)):
            where = directory / META_PROPERTIES
            raise MetaPropertiesError(
                f"{where} belongs to node {props.get('node.id')}, not node.id={node_id}", key="node.id"
            )
    return (cluster_ids.pop() if cluster_ids else None), list(found)


def write_meta_properties(directory: Path, cluster_id: str, node_id: int) -> None:
    """Format ``directory``: create it and write its meta.properties (durably)."""
    directory.mkdir(parents=True, exist_ok=True)
    text = f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n"
    write_atomically(directory / META_PROPERTIES, text)


def ensure_meta_properties(log_dirs: list[Path], node_id: int, configured_cluster_id: str | None) -> str:
    """Check (or write) meta.properties in every log dir; returns the cluster id.

    What a node does on every start: the dirs ``kipling storage format`` left unformatted, or all
    of them on a first start without it, are formatted with the cluster id the others name, else
    ``cluster.id``, else a new one."""
    known, formatted = check_meta_properties(log_dirs, node_id, configured_cluster_id)
    cluster_id = known if known is not None else new_cluster_id()
    for directory in log_dirs:
        if directory not in formatted:
            write_meta_properties(directory, cluster_id, node_id)
    return cluster_id
