"""ApiVersions (18): the API keys and version ranges this broker serves.

The list comes from the handler registry, so it can never advertise an API that has no
handler. No tagged fields are written (supported/finalized features stay empty): librdkafka
before 2.2 mis-parses an ApiVersions v3+ response that carries them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from broker.handlers.base import Handler, RequestContext
from broker.handlers.registry import ApiRange
from protocol.api_keys import ApiKey
from protocol.data import MessageData
from protocol.error_codes import ErrorCode

_SOFTWARE_FIELD = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def api_versions_body(ranges: list[ApiRange], error: ErrorCode = ErrorCode.NONE) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "api_keys": [
            {"api_key": r.api_key, "min_version": r.min_version, "max_version": r.max_version} for r in ranges
        ],
        "throttle_time_ms": 0,
    }


class ApiVersionsHandler(Handler):
    api_key = ApiKey.API_VERSIONS
    min_version = 0
    max_version = 4

    def __init__(self, ranges: Callable[[], list[ApiRange]]) -> None:
        self._ranges = ranges

    async def handle(self, ctx: RequestContext, request: MessageData) -> Any:
        if ctx.api_version >= 3 and not (
            _SOFTWARE_FIELD.match(request.client_software_name or "")
            and _SOFTWARE_FIELD.match(request.client_software_version or "")
        ):
            return api_versions_body(self._ranges(), ErrorCode.INVALID_REQUEST)
        return api_versions_body(self._ranges())

    def error_response(self, ctx: RequestContext, request: MessageData | None, code: ErrorCode) -> Any:
        return api_versions_body(self._ranges(), code)
