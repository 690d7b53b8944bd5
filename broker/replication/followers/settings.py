"""The ``configure`` message of the follower processes, from the broker's configuration.

The follower processes read no configuration file: the broker sends them the replica.* settings,
its log defaults and its inter-broker TLS settings and SASL login, so that one server.properties
governs both. The login's password goes only into this message, over the private IPC socketpair.
"""

from __future__ import annotations

from typing import Any

from broker.client_security import inter_broker_client_security
from client.cleaner_messages import CleanerSettings
from client.replica_messages import FollowerSettings
from server_common.config.broker_config import BrokerConfig
from server_common.config.topic_config import to_log_config

DEFAULT_OFFSETS_REPORT_INTERVAL_MS = 2000


def follower_settings(config: BrokerConfig, broker_epoch: int = -1) -> FollowerSettings:
    """Kafka's replica.* keys, the broker's log defaults and housekeeping intervals.

    Offsets are reported at least as often as high watermarks are checkpointed, so that a
    checkpoint never lags a follower process by more than one interval.
    """
    return FollowerSettings(
        replica_fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
        replica_fetch_min_bytes=config.replica_fetch_min_bytes,
        replica_fetch_max_bytes=config.replica_fetch_max_bytes,
        replica_fetch_response_max_bytes=config.replica_fetch_response_max_bytes,
        replica_fetch_backoff_ms=config.replica_fetch_backoff_ms,
        replica_socket_timeout_ms=config.replica_socket_timeout_ms,
        broker_epoch=broker_epoch,
        log_config=to_log_config({}, config).to_properties(),
        offsets_report_interval_ms=min(
            DEFAULT_OFFSETS_REPORT_INTERVAL_MS, config.replica_high_watermark_checkpoint_interval_ms
        ),
        log_retention_check_interval_ms=config.log_retention_check_interval_ms,
        producer_id_expiration_ms=config.producer_id_expiration_ms,
        log_open_files_max=config.kipling_log_open_files_max,
        log_cleaner=follower_cleaner_settings(config),
        security=inter_broker_client_security(config).to_json(),
    )


def follower_cleaner_settings(config: BrokerConfig) -> dict[str, Any]:
    """The cleaner of a follower process, as the broker's: one cleaner process per log dir, the
    offset map a share of log.cleaner.dedupe.buffer.size and the I/O rate a share of
    log.cleaner.io.max.bytes.per.second (split between the broker and its num.replica.fetchers
    follower processes); empty when log.cleaner.enable is off or no threads."""
    if not config.log_cleaner_enable or config.log_cleaner_threads <= 0:
        return {}
    log_dirs = [str(d) for d in config.log_dirs]
    processes = max(len(log_dirs), 1) * (1 + config.num_replica_fetchers)
    settings = CleanerSettings(
        dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size // processes,
        load_factor=config.log_cleaner_io_buffer_load_factor,
        # log.cleaner.io.max.bytes.per.second bounds all cleaners together (Kafka's one Throttler)
        io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second / processes,
    )
    return {"log_dirs": log_dirs, "backoff_ms": config.log_cleaner_backoff_ms, **settings.to_json()}


__all__ = ["follower_cleaner_settings", "follower_settings"]
