"""Client quota enforcement on the broker (Kafka's ClientQuotaManager): byte-rate quotas of produce
and fetch per user / client id, measured over sampled windows, answered with a throttle time and
enforced by muting the client's connection for that long."""
