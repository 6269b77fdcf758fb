"""``http_request``: an HTTP(S) request from inside the sandbox.

The tool has no network policy of its own: whatever the environment enforces (no network,
an egress proxy named by ``HTTP(S)_PROXY``, a NetworkPolicy) applies to it. httpx reads the
proxy variables from the environment (``trust_env``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, JsonValue

from airlock.errors import ToolError, shorten
from airlock.turn import ToolContext

from ._base import SandboxTool, ToolInput, ToolOptions, cap_text, shown


class HttpRequestInput(ToolInput):
    method: Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] = "GET"
    url: str = Field(description="An http:// or https:// URL.")
    headers: dict[str, str] = Field(default_factory=dict)
    body: str | None = Field(default=None, description="Request body (UTF-8 text).")


class HttpRequestOptions(ToolOptions):
    #: Whole-request timeout, seconds.
    timeout_s: float = Field(default=30.0, gt=0)
    #: Bytes of response body kept; the rest is not read.
    max_response_bytes: int = Field(default=1024 * 1024, gt=0)
    follow_redirects: bool = False


class HttpRequestTool(SandboxTool[HttpRequestInput, HttpRequestOptions]):
    """Sends one HTTP request and returns status, headers and the (capped) body text."""

    name = "http_request"
    description = (
        "Send an HTTP request (method, url, optional headers and body) and return the status, "
        "response headers and body text."
    )
    input_model: ClassVar[type[ToolInput]] = HttpRequestInput
    options_model: ClassVar[type[ToolOptions]] = HttpRequestOptions

    async def run(self, input: HttpRequestInput, ctx: ToolContext) -> JsonValue:
        """Send the request.

        Raises:
            ToolError: ``invalid_input`` for a non-HTTP(S) or malformed URL, a port outside
                1-65535, or a header name or value that is not ASCII; ``execution_failed`` when the
                request fails (connection refused, timeout, proxy denial, …).
        """
        import httpx  # lazy: keeps runner start-up fast

        url = shown(input.url)  # for messages: a URL of megabytes must not come back whole
        if not input.url.lower().startswith(("http://", "https://")):
            raise ToolError.invalid_input(f"url must start with http:// or https://, got {url}")
        try:
            port = httpx.URL(input.url).port
        except httpx.InvalidURL as e:
            raise ToolError.invalid_input(f"invalid url {url}: {shorten(str(e), 400)}") from e
        if port is not None and not 0 < port < 65536:  # httpx would pass it on to connect()
            raise ToolError.invalid_input(f"invalid url {url}: port {port} is not in 1-65535")
        for name, value in input.headers.items():  # httpx encodes headers as ASCII
            if not (name.isascii() and value.isascii()):
                raise ToolError.invalid_input(f"header {shown(name)}: names and values must be ASCII")
        limit = self.options.max_response_bytes
        try:
            async with (
                httpx.AsyncClient(
                    trust_env=True,
                    timeout=self.options.timeout_s,
                    follow_redirects=self.options.follow_redirects,
                ) as client,
                client.stream(
                    input.method,
                    input.url,
                    headers=input.headers,
                    content=input.body.encode("utf-8") if input.body is not None else None,
                ) as response,
            ):
                body = bytearray()
                truncated = False
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > limit:
                        truncated = True
                        break
        except httpx.InvalidURL as e:
            raise ToolError.invalid_input(f"invalid url {url}: {shorten(str(e), 400)}") from e
        except httpx.HTTPError as e:
            raise ToolError.execution_failed(
                f"{input.method} {url} failed: {type(e).__name__}: {shorten(str(e), 400)}"
            ) from e
        text = cap_text(bytes(body[:limit]), limit)
        if truncated:
            text += f"\n[truncated: body longer than {limit} bytes]"
        return {
            "status": response.status_code,
            "headers": dict(response.headers),
            "body": text,
            "truncated": truncated,
        }
