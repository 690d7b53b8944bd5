"""AllocateProducerIds (key 67): a broker asks the controller for its next block of producer ids.

Producer ids must be unique across the cluster and never reused, so the controller hands them out
in blocks and records each block in the metadata log before answering (KIP-730). The broker
epoch fences a stale incarnation of the broker. Flexible from its only version.
"""

from protocol.schema import Field, request, response

ALLOCATE_PRODUCER_IDS_REQUEST = request(
    67,
    "AllocateProducerIds",
    "0",
    "0+",
    Field("broker_id", "int32", "0+"),
    Field("broker_epoch", "int64", "0+", default=-1),
)

ALLOCATE_PRODUCER_IDS_RESPONSE = response(
    67,
    "AllocateProducerIds",
    "0",
    "0+",
    Field("throttle_time_ms", "int32", "0+"),
    Field("error_code", "int16", "0+"),
    Field("producer_id_start", "int64", "0+"),
    Field("producer_id_len", "int32", "0+"),
)
