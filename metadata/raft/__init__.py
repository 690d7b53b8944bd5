"""The metadata quorum (KRaft, KIP-595 with KIP-996 pre-vote) as a sans-IO state machine.

Nothing here opens a socket, starts a task or reads the wall clock on its own: a :class:`RaftNode`
is driven by the messages handed to it and by ``poll()``, reads time from an injected clock and
randomness from an injected ``random.Random``, so tests replay any interleaving deterministically.
"""
