"""A cap on request bodies: beyond it, 413 before the route runs (a declared length is refused
at once; a chunked body is read up to the cap, then refused or passed on whole)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._errors import body

#: Methods whose requests carry a body here.
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class BodyLimit:
    """ASGI middleware refusing bodies over ``limit`` bytes with 413 ``TOO_LARGE``."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _WITH_BODY:
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None:
            if declared.isdigit() and int(declared) > self.limit:
                await self._refuse(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return
        whole = await self._read(receive)
        if whole is None:
            await self._refuse(scope, receive, send)
            return
        await self.app(scope, _replay(whole, receive), send)

    async def _read(self, receive: Receive) -> Message | None:
        """The whole body as one message (None: over the cap, or the client left)."""
        pieces: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            pieces.append(message.get("body", b""))
            size += len(pieces[-1])
            if size > self.limit:
                return None
            if not message.get("more_body", False):
                return {"type": "http.request", "body": b"".join(pieces), "more_body": False}

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        await body(413, "TOO_LARGE", f"the request body exceeds {self.limit} bytes")(scope, receive, send)


def _replay(whole: Message, receive: Receive) -> Receive:
    """``whole`` first, then ``receive`` (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return whole

    return replayed
