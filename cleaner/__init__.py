"""The log cleaner (compaction) outside the event loops: Kafka's cleaner threads as processes.

- ``python -m cleaner`` (:mod:`cleaner.__main__`, :mod:`cleaner.service`): a cleaner process. It reads
  the inactive segments of the tasks its owner sends and writes ``.cleaned`` files.
- :mod:`cleaner.process`, :mod:`cleaner.manager`, :mod:`cleaner.driver`: the owner's side, used by
  the broker (the logs it leads) and by the follower processes (the logs they follow): spawning a
  cleaner process, choosing the filthiest log (Kafka's LogCleanerManager), and the loop that sends
  rounds and installs their results on the owner's event loop.

Imports only protocol, storage and client.
"""
