"""agentfx: expose chosen Messages of an Elm-architecture application to AI agents as typed tools.

This module only re-exports the public API; see each submodule for its layer.
"""

from ._returns import as_result as as_result
from .app import App as App
from .app import ProgramFactory as ProgramFactory
from .audit import AuditEntry as AuditEntry
from .audit import AuditLog as AuditLog
from .audit import AuditRecord as AuditRecord
from .audit import AuditSink as AuditSink
from .audit import audit_log as audit_log
from .builder import AgentBuilder as AgentBuilder
from .builder import for_model as for_model
from .completion import CallInfo as CallInfo
from .completion import Completion as Completion
from .completion import CompletionOutcome as CompletionOutcome
from .completion import Source as Source
from .completion import StateCompletion as StateCompletion
from .completion import when as when
from .confirm import Confirm as Confirm
from .confirm import ConfirmationRequest as ConfirmationRequest
from .contract import Action as Action
from .contract import AuthorizationRequest as AuthorizationRequest
from .contract import Capability as Capability
from .contract import Definition as Definition
from .contract import Exposed as Exposed
from .contract import InvocationContext as InvocationContext
from .contract import Projection as Projection
from .contract import Resource as Resource
from .contract import Variant as Variant
from .contract import action as action
from .contract import define as define
from .contract import expose as expose
from .contract import projection as projection
from .contract import resource as resource
from .contract import variant as variant
from .docs import AgentSchema as AgentSchema
from .docs import MessageDescriptor as MessageDescriptor
from .docs import ResourceDescriptor as ResourceDescriptor
from .docs import Summary as Summary
from .docs import context_schema as context_schema
from .docs import messages as messages
from .docs import resources as resources
from .docs import schema as schema
from .docs import summarize as summarize
from .docs import to_manifest as to_manifest
from .docs import to_markdown as to_markdown
from .errors import AgentAuthorizationError as AgentAuthorizationError
from .errors import AgentCancelledError as AgentCancelledError
from .errors import AgentCapabilityUnavailableError as AgentCapabilityUnavailableError
from .errors import AgentCompletionTimeoutError as AgentCompletionTimeoutError
from .errors import AgentConfirmationRequiredError as AgentConfirmationRequiredError
from .errors import AgentInvalidInputError as AgentInvalidInputError
from .errors import AgentProjectionError as AgentProjectionError
from .errors import AgentResourceError as AgentResourceError
from .errors import AgentUnknownCapabilityError as AgentUnknownCapabilityError
from .errors import ContractError as ContractError
from .errors import DispatchError as DispatchError
from .errors import DispatchFailed as DispatchFailed
from .errors import Refusal as Refusal
from .hints import Hints as Hints
from .host import Host as Host
from .invocation import AbortController as AbortController
from .invocation import AbortSignal as AbortSignal
from .invocation import Invocation as Invocation
from .pipeline import DispatchResult as DispatchResult
from .pipeline import InvocationEnv as InvocationEnv
from .program import Program as Program
from .program import run_program as run_program
from .runtime import AgentRuntime as AgentRuntime
from .runtime import bind as bind
from .tools import ToolReply as ToolReply
from .tools import ToolView as ToolView
from .tools import defect_reply as defect_reply
from .tools import reply as reply
from .tools import tool_views as tool_views

__version__ = "0.1.0"

__all__ = (
    "AbortController",
    "AbortSignal",
    "Action",
    "AgentAuthorizationError",
    "AgentBuilder",
    "AgentCancelledError",
    "AgentCapabilityUnavailableError",
    "AgentCompletionTimeoutError",
    "AgentConfirmationRequiredError",
    "AgentInvalidInputError",
    "AgentProjectionError",
    "AgentResourceError",
    "AgentRuntime",
    "AgentSchema",
    "AgentUnknownCapabilityError",
    "App",
    "AuditEntry",
    "AuditLog",
    "AuditRecord",
    "AuditSink",
    "AuthorizationRequest",
    "CallInfo",
    "Capability",
    "Completion",
    "CompletionOutcome",
    "Confirm",
    "ConfirmationRequest",
    "ContractError",
    "Definition",
    "DispatchError",
    "DispatchFailed",
    "DispatchResult",
    "Exposed",
    "Hints",
    "Host",
    "Invocation",
    "InvocationContext",
    "InvocationEnv",
    "MessageDescriptor",
    "Program",
    "ProgramFactory",
    "Projection",
    "Refusal",
    "Resource",
    "ResourceDescriptor",
    "Source",
    "StateCompletion",
    "Summary",
    "ToolReply",
    "ToolView",
    "Variant",
    "action",
    "as_result",
    "audit_log",
    "bind",
    "context_schema",
    "defect_reply",
    "define",
    "expose",
    "for_model",
    "messages",
    "projection",
    "reply",
    "resource",
    "resources",
    "run_program",
    "schema",
    "summarize",
    "to_manifest",
    "to_markdown",
    "tool_views",
    "variant",
    "when",
)

# Show the public path in reprs and tracebacks. Functions keep their defining
# module's globals, so their doctests still run where they are written.
def _set_public_module() -> None:
    import sys

    for name in __all__:
        value = globals()[name]
        if isinstance(value, type) and value.__module__.startswith("agentfx."):
            # typing.get_type_hints and msgspec's decoders evaluate string annotations in
            # the module ``__module__`` names, so evaluate them first, where they were
            # written; agentfx's own names cover imports made only for type checking.
            namespace = {**globals(), **vars(sys.modules[value.__module__])}
            own: dict[str, object] = value.__dict__.get("__annotations__", {})
            try:
                resolved = {
                    field: eval(hint, namespace, dict(vars(value))) if isinstance(hint, str) else hint
                    for field, hint in own.items()
                }
            except NameError:
                resolved = own
            value.__annotations__ = resolved
            value.__module__ = "agentfx"


_set_public_module()
del _set_public_module
