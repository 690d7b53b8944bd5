"""HeartbeatConnections: a closed heartbeat connection tells the controller its broker may be gone."""

from __future__ import annotations

from broker.handlers.broker_heartbeat import HeartbeatConnections


class Controller:
    def __init__(self) -> None:
        self.lost: list[tuple[int, int]] = []

    def broker_connection_lost(self, broker_id: int, broker_epoch: int) -> None:
        self.lost.append((broker_id, broker_epoch))


def test_only_the_connection_a_broker_heartbeats_on_counts() -> None:
    controller = Controller()
    connections = HeartbeatConnections(controller)  # type: ignore[arg-type]
    connections.heartbeat(7, broker_id=2, broker_epoch=40)
    connections.closed(8)  # another client's connection
    assert controller.lost == []
    connections.heartbeat(9, broker_id=3, broker_epoch=41)
    connections.heartbeat(10, broker_id=3, broker_epoch=41)  # reconnected before the old one closed
    connections.closed(9)
    assert controller.lost == []  # still heartbeating on connection 10
    connections.closed(7)
    connections.closed(7)  # reported once
    assert controller.lost == [(2, 40)]
