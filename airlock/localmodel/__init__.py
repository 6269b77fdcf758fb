"""The airlock-managed local model: an offline LLM served with the OpenAI chat-completions API.

``ensure_model`` fetches and verifies the model file, ``ensure_runtime`` prepares a dedicated
venv with llama-cpp-python, and the server script (``_server_main.py``, run in that venv)
serves ``/v1/chat/completions`` with real ``tool_calls``. ``LocalModelServer`` ties it
together: set up, start (or reuse), hand out ``base_url`` and ``api_key``, stop.
"""

from ._errors import (
    LocalModelError,
    ModelFetchError,
    ModelFileError,
    RuntimeSetupError,
    ServerStartError,
)
from ._fetch import QWEN_CODER_1_5B, ModelSpec, ModelState, ensure_model, model_path, verify_model
from ._manager import DEFAULT_HOST, DEFAULT_PORT, LocalModelServer, ServerInfo
from ._paths import CACHE_DIR_ENV, CachePaths
from ._progress import Phase, ProgressCallback, ProgressEvent
from ._runtime import DEFAULT_RUNTIME, RuntimeSpec, build_wheel, cached_wheel, ensure_runtime, runtime_ready

__all__ = [
    "CACHE_DIR_ENV",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_RUNTIME",
    "QWEN_CODER_1_5B",
    "CachePaths",
    "LocalModelError",
    "LocalModelServer",
    "ModelFetchError",
    "ModelFileError",
    "ModelSpec",
    "ModelState",
    "Phase",
    "ProgressCallback",
    "ProgressEvent",
    "RuntimeSetupError",
    "RuntimeSpec",
    "ServerInfo",
    "ServerStartError",
    "build_wheel",
    "cached_wheel",
    "ensure_model",
    "ensure_runtime",
    "model_path",
    "runtime_ready",
    "verify_model",
]
