"""The broker's side of its follower processes (DESIGN.md section 1).

:class:`~broker.replication.followers.supervisor.FollowerSupervisor` starts ``num.replica.fetchers`` follower
processes (``python -m follower``), hands them the logs of the partitions this broker follows,
restarts them when they die, and brings their metrics to the broker's ``/metrics``.
"""

from broker.replication.followers.fetcher_ids import fetcher_id_for
from broker.replication.followers.settings import follower_settings
from broker.replication.followers.supervisor import FollowedPartition, FollowerSupervisor

__all__ = ["FollowedPartition", "FollowerSupervisor", "fetcher_id_for", "follower_settings"]
