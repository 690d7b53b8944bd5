"""The two ways a SASL exchange fails, as Kafka reports them to the client.

Kafka answers a failed SaslAuthenticate with SASL_AUTHENTICATION_FAILED (58) and the exception's
message, and a token that arrives when the mechanism expects none with ILLEGAL_SASL_STATE (34).
security/ cannot import protocol/, so each class names its wire error code itself; the broker maps
it with ``protocol.error_codes``.
"""

from __future__ import annotations


class AuthenticationError(Exception):
    """A SASL exchange failed; the base of the two errors the mechanisms raise."""

    error_code: int = 58


class SaslAuthenticationError(AuthenticationError):
    """The client's credentials or messages were refused.

    The message is sent to the unauthenticated client as the response's error message, so it never
    contains a secret (a password, a proof, a stored key) nor says whether a user exists.
    """

    error_code = 58  # SASL_AUTHENTICATION_FAILED


class IllegalSaslStateError(AuthenticationError):
    """A token arrived in a state that expects none: after the exchange completed or failed."""

    error_code = 34  # ILLEGAL_SASL_STATE


__all__ = ["AuthenticationError", "IllegalSaslStateError", "SaslAuthenticationError"]
