"""Authentication and transport security, sans-IO: SASL mechanisms (PLAIN, SCRAM), JAAS options,
principals and their mapping rules, and TLS contexts built from Kafka's ``ssl.*`` keys.

Nothing here touches a socket: the broker's connections and kipling's client drive these state
machines with the bytes they receive, so one implementation serves both sides of the wire.
"""
