"""Names of the metadata log, shared by the controller that writes it and the brokers that fetch it."""

import uuid

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
"""KRaft's fixed id of the metadata topic (Uuid.METADATA_TOPIC_ID)."""
METADATA_PARTITION = 0
