"""The metadata quorum on the network: Raft's driver, its peers, and the active controller it elects."""
