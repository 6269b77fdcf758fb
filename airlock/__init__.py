"""airlock: run LLM agents inside real sandboxes.

Packages: ``airlock.turn`` (NeuronTurn, the ReAct loop), ``airlock.providers``
(model providers), ``airlock.tools`` (sandbox tools), ``airlock.runner`` (the
in-sandbox gRPC server), ``airlock.controller`` (environments, policy, jobs),
``airlock.testing`` (in-memory doubles). The protocol lives in ``layer0``.
"""

__version__ = "0.1.0"
