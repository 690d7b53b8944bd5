"""The follower side of replication: fetcher loops that copy the logs of partitions led elsewhere.

A follower process runs one :class:`~follower.fetcher.ReplicaFetcher` per source broker. Each keeps
a :class:`~follower.fetch_state.PartitionFetchState` per partition and repeats Kafka's
``doWork``: truncate the partitions whose log may have diverged from the leader's, then fetch from
the leader and append as follower. The leader is reached only through the
:class:`~follower.leader_endpoint.LeaderEndpoint` protocol, so tests drive the whole loop with an
in-memory leader and real storage logs. See DESIGN.md "Replication" and kafka-behaviour.md section 5.

This package may import protocol, storage and client, never broker (tests/test_architecture.py).
"""
