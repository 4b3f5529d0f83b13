"""Random keys under every assignment shape docs/privacy.md lists: what tests/test_privacy.py and
benchmarks/attacks.py (row `random_keys`) draw against the assignment rule (`privacy/rules.py`)."""

from __future__ import annotations

import random
import re
import string

ALPHABETS = {
    "base62": string.ascii_letters + string.digits,
    "base64url": string.ascii_letters + string.digits + "-_",
    "hex": string.digits + "abcdef",
}
LENGTHS = range(12, 33)


def assignment_shapes(page: str) -> tuple[list[str], list[str]]:
    """The shapes docs/privacy.md lists (its text block after **Assignments.**, `...` where the value
    goes) and its structured examples (JSON in backticks, `...` for the value), read from the page: a
    shape documented there is drawn against the day it is written."""
    section = page.split("**Assignments.**", 1)[1]
    block = section.split("```text\n", 1)[1].split("```", 1)[0]
    shapes = [item for line in block.splitlines() for item in re.split(r" {2,}", line.strip()) if "..." in item]
    after = section.split("```", 2)[2].lstrip().split("\n\n", 1)[0]
    structured = [span for span in re.findall(r"`([\[{][^`]*\.\.\.[^`]*)`", after) if "Basic" not in span]
    return shapes, structured


def random_keys(seed: str, per_length: dict[str, int]) -> list[str]:
    """Random keys of every length in LENGTHS, `per_length[alphabet]` of each alphabet, drawn from `seed`."""
    rng = random.Random(seed)
    return [
        "".join(rng.choice(ALPHABETS[name]) for _ in range(length))
        for length in LENGTHS
        for name, count in per_length.items()
        for _ in range(count)
    ]
