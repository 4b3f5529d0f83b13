"""The secret detectors held against the rule sets people trust, and against real text.

    .venv/bin/python benchmarks/secret_rules.py [--gitleaks PATH/config/gitleaks.toml] [--locomo PATH]
                                                [--samples 50] [--detect-secrets]

1. Coverage of gitleaks' rules (`--gitleaks`: its config/gitleaks.toml, e.g. from
   `git clone https://github.com/gitleaks/gitleaks`). For each rule, `--samples` secrets are
   generated at random from the rule's own regular expression (as gitleaks' tests generate
   theirs), kept when gitleaks itself would report them (one of the rule's keywords is in the
   text, its expression matches, the secret group clears its entropy threshold), then written
   two ways: as the expression produced it,
   and in gitleaks' own sample lines (`{id}_token: {secret}`, `{ID}_TOKEN="{secret}"`, ...:
   cmd/generate/config/utils/generate.go). A sample is caught when the secret is gone from
   what om-mcp would store. Rules that find a provider's token by its prefix are reported
   apart from those that need the provider's name nearby.
2. False positives on real text: this repository's source, tests and documentation, and
   LoCoMo's conversations (`--locomo`: the folder holding locomo_dev.json; CC BY-NC 4.0, read
   in place, never copied), as secrets found per million characters and the first few shown.
3. With `--detect-secrets` (and the package installed: `pip install detect-secrets`), the same
   corpus through detect-secrets' default plugins, line by line: its findings and its time,
   beside ours.

Prints figures; asserts nothing (tests/test_privacy.py holds the counts that must not move).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as P  # type: ignore[attr-defined]

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from om_mcp.privacy import RULES, Redactor, redactor_for  # noqa: E402

# gitleaks' sample lines (cmd/generate/config/utils/generate.go, GenerateSampleSecrets)
TEMPLATES = [
    '{i}Token="{s}"',
    '{i}Token = "{s}"',
    "{i}Token={s}",
    "{i}Token = {s}",
    '{{\n    "{i}_token": "{s}"\n}}',
    '{{"config.ini": "{I}_TOKEN={s}\\nBACKUP_ENABLED=true"}}',
    "<{i}Token>\n    {s}\n</{i}Token>",
    "{i}_token: {s}",
    "{i}_token: '{s}'",
    '{i}_token: "{s}"',
    'string {i}Token = "{s}";',
    'var {i}Token string = "{s}"',
    '{i}Token := "{s}"',
    "{i}Token := `{s}`",
    'String {i}Token = "{s}";',
    'var {i}Token = "{s}"',
    '${i}Token .= "{s}"',
    "{i}Token = '{s}'",
    '{i}Token = "{s}"',
    'System.setProperty("{I}_TOKEN", "{s}")',
    '  "{i}Token" => "{s}"',
    '{i}_TOKEN = "{s}"',
    '{i}_TOKEN := "{s}"',
    '{i}_TOKEN ::= "{s}"',
    '{i}_TOKEN :::= "{s}"',
]


# -- random strings from a regular expression -------------------------------------------------------

_CATEGORIES = {
    C.CATEGORY_DIGIT: "0123456789",
    C.CATEGORY_WORD: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
    C.CATEGORY_SPACE: " \t",
    C.CATEGORY_NOT_DIGIT: "abcdefXYZ_-. ",
    C.CATEGORY_NOT_WORD: " .-:/=",
    C.CATEGORY_NOT_SPACE: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
}
_PRINTABLE = "".join(chr(c) for c in range(33, 127))


def _chars(items: list, rng: random.Random) -> str:
    """The characters an IN set allows (or, negated, a few it does not forbid)."""
    allowed: set[str] = set()
    negate = False
    for op, value in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            allowed.add(chr(value))
        elif op is C.RANGE:
            allowed.update(chr(c) for c in range(value[0], value[1] + 1))
        elif op is C.CATEGORY:
            allowed.update(_CATEGORIES.get(value, ""))
    if negate:
        return "".join(c for c in _PRINTABLE if c not in allowed) or "x"
    return "".join(sorted(allowed)) or "x"


def generate(tree: list, rng: random.Random, groups: dict[int, str]) -> str:
    out = []
    for op, value in tree:
        if op is C.LITERAL:
            out.append(chr(value))
        elif op is C.NOT_LITERAL:
            out.append(rng.choice([c for c in "aZ9_-" if ord(c) != value]))
        elif op is C.ANY:
            out.append(".")  # gitleaks' expressions write `.` for a dot now and then (hooks.slack.com)
        elif op is C.IN:
            out.append(rng.choice(_chars(value, rng)))
        elif op is C.BRANCH:
            out.append(generate(list(rng.choice(value[1])), rng, groups))
        elif op is C.SUBPATTERN:
            text = generate(list(value[-1]), rng, groups)
            if value[0] is not None:
                groups[value[0]] = text
            out.append(text)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
            low, high, body = value
            high = low + rng.randint(0, 12) if high is C.MAXREPEAT else rng.randint(low, high)
            out.extend(generate(list(body), rng, groups) for _ in range(high))
        elif op is C.GROUPREF:
            out.append(groups.get(value, ""))
        elif op is C.ATOMIC_GROUP:
            out.append(generate(list(value), rng, groups))
        # AT, ASSERT, ASSERT_NOT: checked afterwards by matching the sample
    return "".join(out)


def go_to_python(source: str) -> tuple[str, int]:
    """gitleaks' Go (RE2) expressions as Python's: inline (?i) anywhere, POSIX classes, \\z."""
    flags = re.I if "(?i)" in source else 0
    source = source.replace("(?i)", "").replace("[[:alnum:]]", "[A-Za-z0-9]").replace("[:alnum:]", "A-Za-z0-9")
    return source.replace(r"\z", r"\Z"), flags


def entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values()) if value else 0.0


def samples(rule: dict, n: int, rng: random.Random) -> list[tuple[str, str]]:
    """(text as the expression produced it, the secret in it) that gitleaks would report."""
    source, flags = go_to_python(rule["regex"])
    try:
        pattern = re.compile(source, flags)
        tree = list(P.parse(source, flags))
    except (re.error, RecursionError):
        return []
    group = rule.get("secretGroup") or (1 if pattern.groups else 0)
    out: list[tuple[str, str]] = []
    for _ in range(n * 20):
        if len(out) >= n:
            break
        text = generate(tree, rng, {})
        match = pattern.search(text)
        if match is None:
            continue
        secret = match.group(group) if group <= (pattern.groups or 0) else match.group(0)
        if not secret or entropy(secret) < (rule.get("entropy") or 0):
            continue
        if rule.get("keywords") and not any(k in text.lower() for k in rule["keywords"]):
            continue  # gitleaks looks at a text only when it holds one of the rule's keywords
        out.append((text, secret))
    return out


def prefixed(rule: dict) -> bool:
    """Does the rule find its token by a prefix of its own (not by the provider's name nearby)?"""
    return not re.match(r"^(?:\(\?i\))?\[\\w\.-\]\{0,50\}\?", rule.get("regex", "")) and rule["id"] != "generic-api-key"


def caught(redactor: Redactor, text: str, secret: str) -> bool:
    return secret not in redactor.message("user", [{"type": "text", "text": text}], None).parts[0]["text"]


def coverage(path: Path, n: int) -> None:
    config = tomllib.loads(path.read_text(encoding="utf-8"))
    redactor = redactor_for(None)
    rng = random.Random(27)
    kinds: dict[str, list[tuple[str, float, float]]] = {"prefixed": [], "by name": []}
    skipped = []
    for rule in config["rules"]:
        if not rule.get("regex"):
            skipped.append(rule["id"])
            continue
        found = samples(rule, n, rng)
        if not found:
            skipped.append(rule["id"])
            continue
        ident = (rule.get("keywords") or [rule["id"].split("-")[0]])[0].strip("_-.")
        ident = re.sub(r"[^A-Za-z0-9]", "", ident) or "app"
        as_made = sum(caught(redactor, text, secret) for text, secret in found) / len(found)
        lines = [t.format(i=ident, I=ident.upper(), s=secret) for _, secret in found for t in TEMPLATES]
        in_lines = sum(caught(redactor, line, s) for line, (_, s) in zip(lines, [f for f in found for _ in TEMPLATES]))
        kinds["prefixed" if prefixed(rule) else "by name"].append((rule["id"], as_made, in_lines / len(lines)))
    print(f"gitleaks {path}: {len(config['rules'])} rules, {n} samples each ({len(skipped)} not generated: {skipped})")
    for kind, rows in kinds.items():
        full = [r for r in rows if r[2] >= 0.99]
        as_made, in_lines = (sum(r[i] for r in rows) / len(rows) for i in (1, 2))
        print(
            f"  {kind}: {len(rows)} rules; secrets caught as gitleaks' expression writes them {as_made:.1%},"
            f" in its sample lines {in_lines:.1%}; {len(full)} rules caught in every sample line"
        )
        missed = sorted((r for r in rows if r[2] < 0.99), key=lambda r: r[2])
        for rule_id, as_made, in_lines in missed:
            print(f"    {rule_id:45s} as written {as_made:6.1%}   in sample lines {in_lines:6.1%}")


# -- false positives on real text -------------------------------------------------------------------

# Test modules written to hold secrets, and the rule files that spell them out
_WITH_SECRETS = {"test_privacy.py", "test_secret_surfaces.py", "secret_rules.py", "attacks.py", "rules.py"}


def repository_texts() -> list[tuple[str, str]]:
    files = [*sorted((REPO / "om_mcp").rglob("*.py")), *sorted((REPO / "tests").rglob("*.py"))]
    files += [*sorted((REPO / "benchmarks").glob("*.py")), REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in files if p.name not in _WITH_SECRETS]


def locomo_texts(folder: Path) -> list[tuple[str, str]]:
    out = []
    for sample in json.loads((folder / "locomo_dev.json").read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        for key, turns in conversation.items():
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    for field in ("text", "blip_caption", "query"):
                        if isinstance(turn.get(field), str):
                            out.append((f"{sample['sample_id']} {turn.get('dia_id')}", turn[field]))
                    out += [
                        (f"{sample['sample_id']} {turn.get('dia_id')} img_url", url)
                        for url in turn.get("img_url") or []
                    ]
        for field in ("observation", "session_summary", "event_summary"):
            out.append((f"{sample['sample_id']} {field}", json.dumps(sample.get(field), ensure_ascii=False)))
    return out


def false_positives(name: str, texts: list[tuple[str, str]]) -> None:
    redactor = Redactor(RULES, private_tags=False)  # the detectors alone; `<private>` is asked for
    chars = sum(len(t) for _, t in texts)
    start = time.process_time()
    found = [(where, rule, secret) for where, text in texts for rule, secret in redactor.findings(text)]
    seconds = time.process_time() - start
    print(
        f"{name}: {len(texts):,} texts, {chars / 1e6:.2f} M characters: {len(found)} found"
        f" ({len(found) / chars * 1e6:.1f} per million characters), {chars / 1e6 / seconds:.1f} M characters/s CPU"
    )
    for where, rule, secret in found[:40]:
        print(f"    {where}: {rule} {secret[:40]!r}")


def detect_secrets_on(name: str, texts: list[tuple[str, str]]) -> None:
    """detect-secrets as its `scan` command runs it: file by file, default plugins and filters."""
    try:
        from detect_secrets.core.scan import scan_file
        from detect_secrets.settings import default_settings
    except ImportError:
        print("detect-secrets: not installed (pip install detect-secrets)")
        return
    import tempfile

    chars = sum(len(t) for _, t in texts)
    with tempfile.TemporaryDirectory() as folder, default_settings():
        paths = []
        for index, (where, text) in enumerate(texts):
            suffix = Path(where).suffix if Path(where).suffix in (".py", ".md") else ".txt"
            path = Path(folder) / f"{index}{suffix}"
            path.write_text(text, encoding="utf-8")
            paths.append(path)
        start = time.process_time()
        found: Counter[str] = Counter()
        for path in paths:
            for secret in scan_file(str(path)):
                found[secret.type] += 1
        seconds = time.process_time() - start
    print(
        f"detect-secrets on {name}: {sum(found.values())} found ({dict(found.most_common(6))}),"
        f" {chars / 1e6 / seconds:.2f} M characters/s CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gitleaks", type=Path, help="gitleaks' config/gitleaks.toml")
    parser.add_argument("--locomo", type=Path, help="the folder holding locomo_dev.json")
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--detect-secrets", action="store_true", help="compare with detect-secrets' plugins")
    args = parser.parse_args()
    if args.gitleaks:
        coverage(args.gitleaks, args.samples)
    corpora = [("this repository (source, tests, docs)", repository_texts())]
    if args.locomo:
        corpora.append(("LoCoMo (5 conversations)", locomo_texts(args.locomo)))
    for name, texts in corpora:
        false_positives(name, texts)
        if args.detect_secrets:
            detect_secrets_on(name, texts)


if __name__ == "__main__":
    main()
