"""The in-sandbox runner (gRPC server) and RemoteTurn, its client.

The wire contract is ``protos/airlock/runner/v1/runner.proto``; generated code lives in the
private ``airlock._proto`` package and proto types never appear in this package's API.
"""

from ._convert import MalformedMessage

__all__ = ["MalformedMessage"]
