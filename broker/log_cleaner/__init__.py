"""The broker's log cleaner (compaction) over the logs it leads; the driver and the manager live in
the ``cleaner`` package, shared with the follower processes."""

from broker.log_cleaner.service import build_log_cleaner, led_compacted_logs
from cleaner.driver import LogCleaner

__all__ = ["LogCleaner", "build_log_cleaner", "led_compacted_logs"]
