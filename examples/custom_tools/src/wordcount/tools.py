"""Word-count tools. An agent names them by import path in its ``tools:`` list::

    tools: [wordcount.tools:count_words, wordcount.tools:top_words]

Each is a plain typed function: airlock builds the tool's input schema from the annotations
and its description from the docstring. A sync function runs in a worker thread of the
runner; an async one on its event loop.
"""

from __future__ import annotations

import collections
import re

_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def count_words(text: str) -> dict[str, int]:
    """Count the words, the distinct words and the lines of a text.

    Args:
        text: the text to count.
    """
    words = _words(text)
    return {"words": len(words), "distinct": len(set(words)), "lines": len(text.splitlines())}


async def top_words(text: str, n: int = 3) -> list[tuple[str, int]]:
    """The ``n`` most frequent words of a text with their counts, most frequent first (ties in
    alphabetical order).

    Args:
        text: the text to read.
        n: how many words to list.
    """
    counts = collections.Counter(_words(text))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[: max(n, 0)]
