"""Where the transaction coordinator meets the broker: ``__transaction_state`` and its leadership
(:mod:`~broker.transactions.runtime`), transaction markers written to partition leaders here and on
other brokers (:mod:`~broker.transactions.markers`), and the partition leader's check that a
transactional batch belongs to an ongoing transaction (:mod:`~broker.transactions.verification`)."""
