"""What the kipling Spark source and sink raise, so jobs and tests can tell a bad option from lost data.

Messages follow Spark's Kafka source where it has one for the same situation, so that a job moved from
``format("kafka")`` to ``format("kipling")`` fails with the message its authors already know.
"""

from __future__ import annotations

INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because they are not available in the broker any more; either the "
    "data was aged out by retention or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your query to fail on such cases, set the source option \""
    'failOnDataLoss" to "false".'
)
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in the broker any more; either the "
    "data was aged out by retention or the topic may have been deleted before all the data in the "
    'topic was processed. If you want your query to fail on such cases, set the source option "'
    'failOnDataLoss" to "true".'
)


class KiplingOptionError(ValueError):
    """An option is missing, unknown, malformed, or not allowed with another option or query kind.

    A ValueError, like the IllegalArgumentException Spark's Kafka source throws for the same cases.
    """


class KiplingDataLossError(RuntimeError):
    """Offsets a query had to read are gone (retention, deleted topic) and ``failOnDataLoss`` is true."""

    def __init__(self, message: str) -> None:
        super().__init__(f"[KAFKA_DATA_LOSS] {message}. {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}")


class KiplingReadTimeoutError(TimeoutError):
    """A task could not fetch the records it was planned to read within ``kafkaConsumer.pollTimeoutMs``."""


class KiplingWriteError(RuntimeError):
    """Rows could not be written: a bad value in a row, or the broker refused or lost the produce."""


__all__ = [
    "INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE",
    "INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE",
    "KiplingDataLossError",
    "KiplingOptionError",
    "KiplingReadTimeoutError",
    "KiplingWriteError",
]
