"""Attack rows on text, no server needed:

- `random_keys`: random keys (base62, base64url and hex; 12 to 32 characters, `--keys` of each length and
  alphabet) under every assignment shape docs/privacy.md lists, through the secret scan: how many are kept
  (the review saw 4-15 % of base62 keys kept under `API_KEY=`, `"api_key":`, `GITHUB_TOKEN=`, `apiKey =`);
- `injection`: each of our section tags (opening and closing) and each chat-template control token
  (`<|im_start|>`, `[INST]`, `<s>`, `<system>`, ...), written in every injection shape (fullwidth, mathematical
  letters, split by zero-width characters, TAG characters, bidi controls, ...), through the neutralising step
  the blocks we inject pass, and its form for recalled text: how many a model may still read as a tag or token
  (or that keep an invisible character that could split or smuggle one).

    .venv/bin/python benchmarks/attacks.py random_keys injection

The shapes and the oracle are this checkout's (`om_mcp/testing/random_keys.py`, `injection.py`, loaded by
path); the code measured is whatever `om_mcp` imports, so `PYTHONPATH=<another checkout>` measures that one.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
KEYS_PER_LENGTH = 100


def _here(name: str) -> ModuleType:
    """One of this checkout's testing helpers (standard library only), whatever `om_mcp` is on the path."""
    spec = importlib.util.spec_from_file_location(f"_attack_{name}", REPO / "om_mcp" / "testing" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def random_keys(per_length: int = KEYS_PER_LENGTH) -> None:
    from om_mcp.privacy import scrub

    keys = _here("random_keys")
    shapes, structured = keys.assignment_shapes((REPO / "docs" / "privacy.md").read_text(encoding="utf-8"))
    print(f"\nrandom keys kept by the secret scan, {per_length} of each length 12-32 and alphabet (goal: 0)")
    header = f"{'shape':<48} " + " ".join(f"{name:>11}" for name in keys.ALPHABETS)
    print(header)
    print("-" * len(header))
    total = kept_all = 0
    for shape in [*shapes, *structured]:
        row = []
        for name in keys.ALPHABETS:
            values = keys.random_keys(f"{shape}:{name}", {name: per_length})
            if shape in structured:
                kept = sum(v in json.dumps(scrub(None, json.loads(shape.replace("...", v)))[0]) for v in values)
            else:
                kept = sum(v in scrub(None, shape.replace("...", v))[0] for v in values)
            row.append(f"{kept:>5}/{len(values):<5}")
            total += len(values)
            kept_all += kept
        print(f"{shape[:48]:<48} " + " ".join(row))
    print(f"{'all shapes':<48} {kept_all} of {total} kept ({kept_all / total:.3%})")


def _neutralisers() -> tuple[Callable[[str], str], Callable[[str], str] | None, tuple[str, ...]]:
    import om_mcp

    if (Path(om_mcp.__file__).parent / "neutral.py").exists():
        neutral = importlib.import_module("om_mcp.neutral")
        return neutral.neutralise, neutral.neutralise_inline, neutral.SECTION_TAGS
    # before the step moved down (engine/context/escape.py), recall had none
    escape = importlib.import_module("om_mcp.engine.context.escape")
    return escape.neutralise, None, escape.SECTION_TAGS


def injection() -> None:
    inject = _here("injection")
    neutralise, inline, tags = _neutralisers()
    tags = (*tags, "mood")  # an extractor's slug: its block is one of ours too
    targets = [*(f"</{t}>" for t in tags), *(f"<{t}>" for t in tags), *inject.CONTROL_TOKENS]
    print(f"\ninjection shapes that pass the neutralising step ({len(targets)} targets each; goal: 0)")
    header = f"{'shape':<30} {'blocks':>9} {'recalled':>9}"
    print(header)
    print("-" * len(header))

    def passes(text: str, names: set[str]) -> bool:
        return bool(+inject.live(text, names) or inject.invisible(text))

    recall = inline or (lambda text: text)  # before, a recalled message was shown as it was
    passed_all = 0
    for shape, write in inject.SHAPES.items():
        blocks = sum(passes(neutralise(write(t)), set(tags)) for t in targets)
        recalled = sum(passes(recall(write(t)), set(tags) - {"mood"}) for t in targets)  # markup kept there
        passed_all += blocks + recalled
        print(f"{shape:<30} {blocks:>9} {recalled:>9}")
    print(f"{'all shapes':<30} {passed_all} of {2 * len(targets) * len(inject.SHAPES)} pass")
