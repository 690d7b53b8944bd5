"""The cluster's ACLs as the metadata image holds them (Kafka's ``AclCache``), indexed for the
authorizer.

Replayed from AccessControlEntryRecord and RemoveAccessControlEntryRecord: each ACL has the uuid
the controller drew for it, and no binding is stored twice (the controller never writes one that
exists). Besides the ids, every ACL is indexed by resource type and then

* for LITERAL patterns, by name (the wildcard ``*`` is one more name);
* for PREFIXED patterns, by prefix, with the prefixes also kept in a sorted list, so the prefixes
  of a resource name are found by bisection (:func:`prefixes_of`), as Kafka's StandardAuthorizer
  walks its sorted set, not by testing every prefix ACL.

So :meth:`AclCache.resource_acls`, the ACLs that apply to one resource, costs a few dictionary
lookups and bisections, whatever the number of ACLs.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from protocol.acl_bindings import WILDCARD_RESOURCE, AclBinding, AclBindingFilter
from protocol.acl_types import PatternType, ResourceType

__all__ = ["AclCache", "acl_record", "binding_of", "prefixes_of"]


def binding_of(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding.from_codes(
        record.resource_type,
        record.resource_name,
        record.pattern_type,
        record.principal,
        record.host,
        record.operation,
        record.permission_type,
    )


def acl_record(acl_id: uuid.UUID, binding: AclBinding) -> AccessControlEntryRecord:
    p, e = binding.pattern, binding.entry
    return AccessControlEntryRecord(
        acl_id,
        int(p.resource_type),
        p.name,
        int(p.pattern_type),
        e.principal,
        e.host,
        int(e.operation),
        int(e.permission_type),
    )


def prefixes_of(sorted_prefixes: list[str], name: str) -> Iterator[str]:
    """The strings of ``sorted_prefixes`` (sorted, none empty) that are prefixes of ``name``,
    longest first.

    Every prefix of ``name`` sorts at or below it. Take the largest entry at or below the current
    key (a prefix of ``name``): if it is a prefix of the key, it is one of ``name``; either way no
    longer prefix than the common part of the entry and the key can be in the list (it would sort
    between the entry and the key), so the search goes on with that shorter key.
    """
    key = name
    while key:
        i = bisect.bisect_right(sorted_prefixes, key)
        if i == 0:
            return
        candidate = sorted_prefixes[i - 1]
        common = _common_length(candidate, key)
        if common == len(candidate):
            yield candidate
            key = candidate[:-1]
        else:
            key = key[:common]


def _common_length(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid
    return low


@dataclass(slots=True)
class _TypeAcls:
    """The ACLs of one resource type."""

    literal: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefixed: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefixes: list[str] = field(default_factory=list)
    """The keys of ``prefixed``, sorted."""

    def add(self, binding: AclBinding) -> None:
        name = binding.pattern.name
        if binding.pattern.pattern_type is PatternType.PREFIXED:
            if name not in self.prefixed:
                bisect.insort(self.prefixes, name)
            self.prefixed.setdefault(name, []).append(binding)
        else:
            self.literal.setdefault(name, []).append(binding)

    def remove(self, binding: AclBinding) -> None:
        name = binding.pattern.name
        prefixed = binding.pattern.pattern_type is PatternType.PREFIXED
        by_name = self.prefixed if prefixed else self.literal
        bindings = by_name[name]
        bindings.remove(binding)
        if not bindings:
            del by_name[name]
            if prefixed:
                del self.prefixes[bisect.bisect_left(self.prefixes, name)]

    def matching(self, name: str) -> Iterator[AclBinding]:
        """The ACLs whose pattern matches resource ``name``."""
        yield from self.literal.get(name, ())
        if name != WILDCARD_RESOURCE:
            yield from self.literal.get(WILDCARD_RESOURCE, ())
        for prefix in prefixes_of(self.prefixes, name):
            yield from self.prefixed[prefix]

    def all(self) -> Iterator[AclBinding]:
        for bindings in self.literal.values():
            yield from bindings
        for bindings in self.prefixed.values():
            yield from bindings

    def __bool__(self) -> bool:
        return bool(self.literal or self.prefixed)


class AclCache:
    """Every ACL of the cluster, by id and by resource: one part of a
    :class:`~metadata.image.MetadataImage`, changed only by replaying records."""

    def __init__(self) -> None:
        self._by_id: dict[uuid.UUID, AclBinding] = {}
        self._ids: dict[AclBinding, uuid.UUID] = {}
        self._by_type: dict[ResourceType, _TypeAcls] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, acl_id: uuid.UUID) -> AclBinding | None:
        return self._by_id.get(acl_id)

    def id_of(self, binding: AclBinding) -> uuid.UUID | None:
        """The id of the ACL ``binding`` describes, None when there is none."""
        return self._ids.get(binding)

    def __contains__(self, binding: object) -> bool:
        return binding in self._ids

    def items(self) -> list[tuple[uuid.UUID, AclBinding]]:
        """Every ACL with its id, by id (snapshots)."""
        return sorted(self._by_id.items(), key=lambda item: item[0].bytes)

    def resource_acls(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        """The ACLs that apply to resource (``resource_type``, ``name``): those of the literal name,
        the wildcard ``*`` and every prefix pattern of the name, in no particular order."""
        acls = self._by_type.get(resource_type)
        return iter(()) if acls is None else acls.matching(name)

    def of_type(self, resource_type: ResourceType) -> Iterator[AclBinding]:
        """Every ACL on resources of ``resource_type``."""
        acls = self._by_type.get(resource_type)
        return iter(()) if acls is None else acls.all()

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs ``binding_filter`` matches (Kafka's ``AclCache.acls``), sorted by
        :meth:`~protocol.acl_bindings.AclBinding.sort_key`."""
        found = [b for b in self._candidates(binding_filter) if binding_filter.matches(b)]
        return sorted(set(found), key=AclBinding.sort_key)

    def matching_ids(self, binding_filter: AclBindingFilter) -> list[tuple[uuid.UUID, AclBinding]]:
        """The ACLs ``binding_filter`` matches, with their ids (DeleteAcls), in binding order."""
        return [(self._ids[binding], binding) for binding in self.acls(binding_filter)]

    def _candidates(self, binding_filter: AclBindingFilter) -> Iterable[AclBinding]:
        """A superset of the ACLs the filter may match, narrowed by its resource type and name."""
        pattern = binding_filter.pattern
        if pattern.resource_type is ResourceType.ANY:
            return self._by_id.values()
        acls = self._by_type.get(pattern.resource_type)
        if acls is None:
            return ()
        if pattern.name is None:
            return acls.all()
        if pattern.pattern_type is PatternType.MATCH:
            return acls.matching(pattern.name)
        if pattern.pattern_type is PatternType.LITERAL:
            return acls.literal.get(pattern.name, ())
        if pattern.pattern_type is PatternType.PREFIXED:
            return acls.prefixed.get(pattern.name, ())
        return acls.all()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AclCache):
            return NotImplemented
        return self._by_id == other._by_id

    __hash__ = None  # type: ignore[assignment]  # unhashable, like the image that holds it

    def __repr__(self) -> str:
        return f"AclCache(acls={len(self._by_id)})"

    # -- replay: check first, then change; return why not, or None ----------------------------------

    def add(self, record: AccessControlEntryRecord) -> str | None:
        """Kafka's replay refuses an id or a binding that exists: the controller draws a new id for
        each ACL and never writes a binding twice, so such a log is not this image's."""
        if record.id in self._by_id:
            return f"an ACL with id {record.id} already exists"
        binding = binding_of(record)
        if binding in self._ids:
            return f"the ACL {binding} already exists with id {self._ids[binding]}"
        self._by_id[record.id] = binding
        self._ids[binding] = record.id
        self._by_type.setdefault(binding.pattern.resource_type, _TypeAcls()).add(binding)
        return None

    def remove(self, record: RemoveAccessControlEntryRecord) -> str | None:
        binding = self._by_id.pop(record.id, None)
        if binding is None:
            return f"no ACL has id {record.id}"
        del self._ids[binding]
        acls = self._by_type[binding.pattern.resource_type]
        acls.remove(binding)
        if not acls:
            del self._by_type[binding.pattern.resource_type]
        return None
