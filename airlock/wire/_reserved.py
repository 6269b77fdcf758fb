"""Values an older client sent at a field number this contract has reserved.

A field that changed type moved to a new number and its old number is ``reserved``
(protos/README.md, "Versioning"). An older client still writes the old number; protobuf keeps
that value as an unknown field, so without this check the request would silently get the
default instead of what the client asked for. Such a request is refused instead, naming the
message and the number.
"""

from __future__ import annotations

from functools import cache

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor_pb2 import DescriptorProto
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from ._problems import Problem


@cache
def _reserved(descriptor: Descriptor) -> frozenset[int]:
    """The field numbers ``descriptor`` reserves."""
    proto = DescriptorProto()
    descriptor.CopyToProto(proto)
    return frozenset(n for r in proto.reserved_range for n in range(r.start, r.end))


@cache
def _holds_reserved(descriptor: Descriptor) -> bool:
    """Whether ``descriptor`` or a message type below it reserves a number."""
    return bool(_reserved(descriptor)) or any(
        _holds_reserved(f.message_type) for f in descriptor.fields if _is_message(f)
    )


def _is_message(field: FieldDescriptor) -> bool:
    return field.message_type is not None and not field.message_type.GetOptions().map_entry


def reserved_problems(message: Message, path: str = "") -> list[Problem]:
    """A problem for each reserved field number set in ``message`` or below it (located at the
    message holding it); none for a message written by this version."""
    descriptor = message.DESCRIPTOR
    if not _holds_reserved(descriptor):
        return []
    problems: list[Problem] = []
    reserved = _reserved(descriptor)
    if reserved:
        unknown = UnknownFieldSet(message)
        found = sorted({unknown[i].field_number for i in range(len(unknown))} & reserved)
        problems.extend(
            Problem(
                path,
                f"field {number} is no longer read: it was replaced in this version of the contract "
                "(a new type at a new number; see protos/README.md, 'Changes in this version')",
            )
            for number in found
        )
    for field, value in message.ListFields():
        if not _is_message(field) or not _holds_reserved(field.message_type):
            continue
        where = f"{path}.{field.name}" if path else field.name
        if field.is_repeated:
            for i, item in enumerate(value):
                problems.extend(reserved_problems(item, f"{where}[{i}]"))
        else:
            problems.extend(reserved_problems(value, where))
    return problems
