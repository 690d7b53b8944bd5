"""AlterConfigs (33): the legacy, non-incremental config change.

Each resource's overrides become exactly the keys the request names: every other override of the
resource is deleted (Kafka's semantics; IncrementalAlterConfigs changes single keys). Only SET
exists, a null value is INVALID_REQUEST, and a BROKER resource names this broker or, as in Kafka,
``""``: the cluster defaults, replaced as a whole too. Served like IncrementalAlterConfigs:
by the controller on its listener, forwarded by brokers (broker/handlers/incremental_alter_configs.py).
"""

from __future__ import annotations

from broker.handlers.incremental_alter_configs import IncrementalAlterConfigsHandler
from protocol.api_keys import ApiKey

__all__ = ["AlterConfigsHandler"]


class AlterConfigsHandler(IncrementalAlterConfigsHandler):
    """The controller's AlterConfigs."""

    api_key = ApiKey.ALTER_CONFIGS
    min_version = 0
    max_version = 2
    incremental = False
