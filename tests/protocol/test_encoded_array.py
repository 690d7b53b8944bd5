"""An array encoded once (:class:`~protocol.wire.EncodedArray`) is written exactly as the codec would
write the list itself, in every version, compiled or interpreted: the Metadata handler relies on it
to reuse a topic's encoded partitions across requests."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.api_keys import ApiKey
from protocol.messages import RESPONSES
from protocol.schema import MessageCodec
from protocol.wire import EncodedArray

SPEC = RESPONSES[ApiKey.METADATA]
VERSIONS = range(0, 13)

partition = st.fixed_dictionaries(
    {
        "error_code": st.sampled_from([0, 5]),
        "partition_index": st.integers(0, 2**31 - 1),
        "leader_id": st.integers(-1, 1000),
        "leader_epoch": st.integers(-1, 2**31 - 1),
        "replica_nodes": st.lists(st.integers(0, 1000), max_size=5),
        "isr_nodes": st.lists(st.integers(0, 1000), max_size=5),
        "offline_replicas": st.lists(st.integers(0, 1000), max_size=2),
    }
)


def body(partitions: Any) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "topic_id": uuid.UUID(int=7),
                "is_internal": False,
                "partitions": partitions,
                "topic_authorized_operations": -(2**31),
            }
        ],
        "cluster_authorized_operations": -(2**31),
    }


@settings(max_examples=40, deadline=None)
@given(partitions=st.lists(partition, max_size=20), version=st.sampled_from(VERSIONS), compiled=st.booleans())
def test_an_encoded_array_is_written_as_the_list_would_be(
    partitions: list[dict[str, Any]], version: int, compiled: bool
) -> None:
    codec = MessageCodec(SPEC, version, compiled=compiled) if not compiled else SPEC.codec(version)
    encoded = codec.array_encoder("topics", "partitions")(partitions)
    assert isinstance(encoded, EncodedArray)
    assert codec.encode(body(encoded)) == codec.encode(body(partitions))
    assert (
        codec.decode(codec.encode(body(encoded))).topics[0].partitions
        == codec.decode(codec.encode(body(partitions))).topics[0].partitions
    )


def test_array_encoder_names_what_it_cannot_find() -> None:
    codec = SPEC.codec(12)
    with pytest.raises(KeyError, match=r"no field topics\.nope"):
        codec.array_encoder("topics", "nope")
    with pytest.raises(TypeError, match="cluster_id is not an array"):
        codec.array_encoder("cluster_id")
