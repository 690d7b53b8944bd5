"""Every message kipling declares, collected from the modules of this package.

Each module declares the request and response of one API (or a few related ones) as
module-level :class:`~protocol.schema.MessageSpec` constants; this registry finds them, so
adding an API means adding a module and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil

from protocol.schema import MessageSpec


def _collect() -> tuple[dict[int, MessageSpec], dict[int, MessageSpec]]:
    requests: dict[int, MessageSpec] = {}
    responses: dict[int, MessageSpec] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if not isinstance(value, MessageSpec):
                continue
            table = requests if value.type == "request" else responses if value.type == "response" else None
            if table is None:
                continue
            if value.api_key in table and table[value.api_key] is not value:
                raise RuntimeError(f"two {value.type}s declared for api key {value.api_key}")
            table[value.api_key] = value
    return requests, responses


REQUESTS, RESPONSES = _collect()
"""api key → the declared request / response."""
