"""The handlers a broker serves, by API key; ApiVersions is computed from it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from broker.handlers.base import Handler
from protocol.messages import REQUESTS, RESPONSES


@dataclass(frozen=True, slots=True)
class ApiRange:
    api_key: int
    min_version: int
    max_version: int


class HandlerRegistry:
    """Maps API keys to handlers and checks each declared range against the codec's."""

    def __init__(self, handlers: Iterable[Handler]) -> None:
        self._handlers: dict[int, Handler] = {}
        for handler in handlers:
            self.register(handler)

    def register(self, handler: Handler) -> None:
        key = int(handler.api_key)
        if key in self._handlers:
            raise ValueError(f"two handlers for api key {key}")
        for spec in (REQUESTS.get(key), RESPONSES.get(key)):
            if spec is None:
                raise ValueError(f"api key {key} has no declared schema")
            if handler.min_version not in spec.versions or handler.max_version not in spec.versions:
                raise ValueError(
                    f"{type(handler).__name__} serves v{handler.min_version}-{handler.max_version} "
                    f"but {spec.name} declares {spec.valid_versions}"
                )
        self._handlers[key] = handler

    def get(self, api_key: int) -> Handler | None:
        return self._handlers.get(api_key)

    def supports(self, api_key: int, api_version: int) -> bool:
        handler = self._handlers.get(api_key)
        return handler is not None and handler.min_version <= api_version <= handler.max_version

    def api_ranges(self) -> list[ApiRange]:
        """What ApiVersions advertises: exactly the served ranges, in key order."""
        return [ApiRange(key, h.min_version, h.max_version) for key, h in sorted(self._handlers.items())]
