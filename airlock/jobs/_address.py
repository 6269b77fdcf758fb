"""Where the jobs API listens by default, and the largest message either side sends."""

from __future__ import annotations

#: Largest request or response (a TurnInput with images, a long output).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: Where ``airlock serve`` listens unless told otherwise (loopback only).
DEFAULT_ADDRESS = "127.0.0.1:7878"
