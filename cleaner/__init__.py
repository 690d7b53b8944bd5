"""Cleaner processes: Kafka's log cleaner threads as processes, so that cleaning never holds the
broker's GIL. Each reads the inactive segments of the tasks its broker sends and writes ``.cleaned``
files; the broker (the log's owner) installs them. Imports only protocol, storage and client."""
