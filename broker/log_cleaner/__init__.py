"""The broker's log cleaner (compaction): the manager choosing logs and the service driving cleaner
processes (the ``cleaner`` package) over the logs the broker owns."""

from broker.log_cleaner.manager import CleanableLog, LogCleanerManager, LogToClean
from broker.log_cleaner.service import LogCleaner, build_log_cleaner, led_compacted_logs

__all__ = [
    "CleanableLog",
    "LogCleaner",
    "LogCleanerManager",
    "LogToClean",
    "build_log_cleaner",
    "led_compacted_logs",
]
