"""The wire: every layer0/airlock value ↔ its protobuf message, in one place.

The runner's protos (``protos/airlock/runner/v1/runner.proto``) mirror layer0's types as
real messages, so a client in any language gets typed messages; this package is the one
converter between them and the Python models, shared by the runner, its client and the
controller (which keeps only its job messages in ``airlock.jobs.convert``). Every
conversion is lossless; a test round-trips each of layer0's golden vectors through it.

Reading a message that does not carry a valid value raises :class:`MalformedMessage`,
whose text is one line per problem (``path: what is wrong``), fit for an INVALID_ARGUMENT
answer to a client in any language. :class:`BearerAuth`, :class:`RejectCorruptRequests` and
:func:`add_reflection` are the gRPC server plumbing both airlock services share.
"""

import typing as _typing  # as private names: this package exports exactly __all__

from airlock.lazy import lazy_names as _lazy_names

if _typing.TYPE_CHECKING:
    from ._auth import BearerAuth, authorization_value, bearer_credentials
    from ._content import (
        block_from_proto,
        block_to_proto,
        content_from_proto,
        content_to_proto,
        image_source_from_proto,
        image_to_proto,
    )
    from ._enums import (
        CONTEXT_STRATEGY,
        LOG_LEVEL,
        PROVIDER_KIND,
        STOP_REASON,
        TURN_ERROR_KIND,
        TURN_ERROR_KINDS,
        WIRE_ENUMS,
        WireEnum,
    )
    from ._events import (
        error_event,
        event_from_proto,
        event_to_proto,
        output_event,
        pending_call_from_proto,
        pending_call_to_proto,
        suspended_event,
        turn_error_from_proto,
    )
    from ._primitives import duration_from_proto, duration_to_proto, json_from_proto, json_text, json_to_proto
    from ._problems import MalformedMessage, Problem, located, problems_of, validation_problems
    from ._refusing import Refusal, refusing_handler
    from ._reserved import reserved_problems
    from ._server import HEALTH_SERVICE_NAME, RejectCorruptRequests, add_reflection
    from ._spec import AGENT_SPEC_FIELDS, PROVIDER_SPEC_FIELDS, spec_from_proto, spec_to_proto
    from ._status import DOMAIN, StatusDetails, abort_with_details, rich_status, status_details
    from ._tagged import (
        exit_reason_from_proto,
        exit_reason_to_proto,
        scope_from_proto,
        scope_to_proto,
        trigger_from_proto,
        trigger_to_proto,
    )
    from ._turn import (
        config_from_proto,
        config_to_proto,
        effect_from_proto,
        effect_to_proto,
        input_from_proto,
        input_to_proto,
        metadata_from_proto,
        metadata_to_proto,
        output_from_proto,
        output_to_proto,
        signal_payload_from_proto,
        signal_payload_to_proto,
        state_from_proto,
        state_to_proto,
        tool_call_from_proto,
        tool_call_to_proto,
    )

__all__ = [
    "AGENT_SPEC_FIELDS",
    "CONTEXT_STRATEGY",
    "DOMAIN",
    "HEALTH_SERVICE_NAME",
    "LOG_LEVEL",
    "PROVIDER_KIND",
    "PROVIDER_SPEC_FIELDS",
    "STOP_REASON",
    "TURN_ERROR_KIND",
    "TURN_ERROR_KINDS",
    "WIRE_ENUMS",
    "BearerAuth",
    "MalformedMessage",
    "Problem",
    "Refusal",
    "RejectCorruptRequests",
    "StatusDetails",
    "WireEnum",
    "abort_with_details",
    "add_reflection",
    "authorization_value",
    "bearer_credentials",
    "block_from_proto",
    "block_to_proto",
    "config_from_proto",
    "config_to_proto",
    "content_from_proto",
    "content_to_proto",
    "duration_from_proto",
    "duration_to_proto",
    "effect_from_proto",
    "effect_to_proto",
    "error_event",
    "event_from_proto",
    "event_to_proto",
    "exit_reason_from_proto",
    "exit_reason_to_proto",
    "image_source_from_proto",
    "image_to_proto",
    "input_from_proto",
    "input_to_proto",
    "json_from_proto",
    "json_text",
    "json_to_proto",
    "located",
    "metadata_from_proto",
    "metadata_to_proto",
    "output_event",
    "output_from_proto",
    "output_to_proto",
    "pending_call_from_proto",
    "pending_call_to_proto",
    "problems_of",
    "refusing_handler",
    "reserved_problems",
    "rich_status",
    "scope_from_proto",
    "scope_to_proto",
    "signal_payload_from_proto",
    "signal_payload_to_proto",
    "spec_from_proto",
    "spec_to_proto",
    "state_from_proto",
    "state_to_proto",
    "status_details",
    "suspended_event",
    "tool_call_from_proto",
    "tool_call_to_proto",
    "trigger_from_proto",
    "trigger_to_proto",
    "turn_error_from_proto",
    "validation_problems",
]

#: Each name's module: importing the wire costs nothing until a name is used, so a runner
#: serves its health check before it loads the turn's converters (and pydantic, layer0).
_WHERE = {
    "BearerAuth": "._auth",
    "authorization_value": "._auth",
    "bearer_credentials": "._auth",
    "block_from_proto": "._content",
    "block_to_proto": "._content",
    "content_from_proto": "._content",
    "content_to_proto": "._content",
    "image_source_from_proto": "._content",
    "image_to_proto": "._content",
    "CONTEXT_STRATEGY": "._enums",
    "LOG_LEVEL": "._enums",
    "PROVIDER_KIND": "._enums",
    "STOP_REASON": "._enums",
    "TURN_ERROR_KIND": "._enums",
    "TURN_ERROR_KINDS": "._enums",
    "WIRE_ENUMS": "._enums",
    "WireEnum": "._enums",
    "error_event": "._events",
    "event_from_proto": "._events",
    "event_to_proto": "._events",
    "output_event": "._events",
    "pending_call_from_proto": "._events",
    "pending_call_to_proto": "._events",
    "suspended_event": "._events",
    "turn_error_from_proto": "._events",
    "duration_from_proto": "._primitives",
    "duration_to_proto": "._primitives",
    "json_from_proto": "._primitives",
    "json_text": "._primitives",
    "json_to_proto": "._primitives",
    "MalformedMessage": "._problems",
    "Problem": "._problems",
    "located": "._problems",
    "problems_of": "._problems",
    "reserved_problems": "._reserved",
    "validation_problems": "._problems",
    "HEALTH_SERVICE_NAME": "._server",
    "RejectCorruptRequests": "._server",
    "Refusal": "._refusing",
    "refusing_handler": "._refusing",
    "add_reflection": "._server",
    "DOMAIN": "._status",
    "StatusDetails": "._status",
    "abort_with_details": "._status",
    "rich_status": "._status",
    "status_details": "._status",
    "AGENT_SPEC_FIELDS": "._spec",
    "PROVIDER_SPEC_FIELDS": "._spec",
    "spec_from_proto": "._spec",
    "spec_to_proto": "._spec",
    "exit_reason_from_proto": "._tagged",
    "exit_reason_to_proto": "._tagged",
    "scope_from_proto": "._tagged",
    "scope_to_proto": "._tagged",
    "trigger_from_proto": "._tagged",
    "trigger_to_proto": "._tagged",
    "config_from_proto": "._turn",
    "config_to_proto": "._turn",
    "effect_from_proto": "._turn",
    "effect_to_proto": "._turn",
    "input_from_proto": "._turn",
    "input_to_proto": "._turn",
    "metadata_from_proto": "._turn",
    "metadata_to_proto": "._turn",
    "output_from_proto": "._turn",
    "output_to_proto": "._turn",
    "signal_payload_from_proto": "._turn",
    "signal_payload_to_proto": "._turn",
    "state_from_proto": "._turn",
    "state_to_proto": "._turn",
    "tool_call_from_proto": "._turn",
    "tool_call_to_proto": "._turn",
}

if not _typing.TYPE_CHECKING:  # mypy sees the imports above: a module __getattr__ would type every name Any
    __getattr__, __dir__ = _lazy_names(__name__, globals(), _WHERE)
