"""The basic text search every store shares: term matching over a value's JSON text."""

from __future__ import annotations

from collections.abc import Iterable

from layer0 import SearchResult

SNIPPET_RADIUS = 40


def query_terms(query: str) -> list[str]:
    """The distinct lower-cased whitespace-separated terms of ``query``, in order."""
    return list(dict.fromkeys(query.lower().split()))


def _snippet(text: str, start: int, length: int) -> str:
    lo = max(0, start - SNIPPET_RADIUS)
    hi = min(len(text), start + length + SNIPPET_RADIUS)
    return ("…" if lo > 0 else "") + text[lo:hi] + ("…" if hi < len(text) else "")


def score_text(text: str, terms: list[str]) -> tuple[float, int, str] | None:
    """Score ``text`` against ``terms`` (case-insensitive substring match).

    Returns ``(score, occurrences, snippet)`` or None when no term occurs. The score
    is the fraction of terms found (1.0: all of them); the snippet surrounds the
    first occurrence of the first matching term.
    """
    lowered = text.lower()
    if len(lowered) != len(text):
        # Rare characters change length when lower-cased; fall back to casefold-free
        # positions so that snippets still point at the right place.
        lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    found = 0
    occurrences = 0
    first: tuple[int, int] | None = None
    for term in terms:
        pos = lowered.find(term)
        if pos < 0:
            continue
        found += 1
        occurrences += lowered.count(term)
        if first is None:
            first = (pos, len(term))
    if first is None:
        return None
    return found / len(terms), occurrences, _snippet(text, *first)


def rank(items: Iterable[tuple[str, str]], query: str, limit: int) -> list[SearchResult]:
    """Search ``(key, json_text)`` pairs; best first, at most ``limit`` results.

    Ordering: higher score, then more occurrences, then key. An empty query or a
    ``limit`` below 1 gives ``[]``.
    """
    terms = query_terms(query)
    if not terms or limit < 1:
        return []
    scored: list[tuple[float, int, str, str]] = []
    for key, text in items:
        hit = score_text(text, terms)
        if hit is not None:
            scored.append((hit[0], hit[1], key, hit[2]))
    scored.sort(key=lambda s: (-s[0], -s[1], s[2]))
    return [SearchResult(key=key, score=score, snippet=snip) for score, _, key, snip in scored[:limit]]
