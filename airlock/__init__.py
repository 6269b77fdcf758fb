"""airlock: run LLM agents inside real sandboxes.

An agent is data (``airlock.spec``); ``airlock.build.build_turn`` makes it a NeuronTurn
(``airlock.turn``, the ReAct loop) from ``airlock.providers`` and ``airlock.tools``.
``airlock.sandbox`` runs a turn in a sandbox (Docker or a local process) under the rules of
``airlock.policy``, enforced by ``airlock.proxy``; inside it, ``airlock.runner`` serves the
turn over gRPC (``airlock.wire`` converts). ``airlock.controller`` is the job service,
``airlock.cli`` the command, ``airlock.testing`` the public doubles. The protocol lives in
``layer0``; the README's Layout section lists every package.
"""

__version__ = "0.1.0"
