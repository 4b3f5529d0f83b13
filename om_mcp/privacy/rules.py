"""The built-in secret detectors: one named rule each, matched before a message is stored.

A match becomes `[redacted:<rule>]`. Where a rule names the part that is secret (the
value of `password=...`, the token after `Bearer`), only that part is replaced, so
the text still reads ("password=[redacted:secret-assignment]"). Each rule is tested
against positive and negative examples in tests/test_privacy.py, and the whole set
against the repository's own test files, where it must not fire on ordinary code.

Why these shapes:
- Provider keys have fixed prefixes (AKIA, ghp_, xoxb-, sk-ant-): matched exactly.
- `password=`/`secret=` assignments are the common leak with no prefix (.env files,
  shell output, config dumps). To stay quiet on code, the name must *end* in a secret
  word (`db_password`, `OM_HTTP_TOKEN`; not `max_tokens`, `tokenizer`, `password_file`),
  and the value must look like a literal: quoted, or a bare word with letters and
  digits that is not a call, an attribute, a type or a placeholder.
- `hints` are lower-case substrings one of which must occur for the rule to run at all:
  most text mentions no secret word, and the check is cheaper than the regular expression.
  A rule's expression is compiled the first time a text needs it: the host hook runs in a
  new process on every prompt, and compiling all of them up front costs it 20 ms.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

MARKER_PREFIX = "[redacted:"


def marker(rule: str) -> str:
    return f"{MARKER_PREFIX}{rule}]"


@dataclass(frozen=True)
class Rule:
    name: str
    source: str  # the regular expression
    flags: int = 0
    groups: tuple[str, ...] = ()  # the first of these that matched is the secret; none: the whole match
    hints: tuple[str, ...] = ()
    check: Callable[[re.Match[str]], bool] | None = field(default=None, compare=False)

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.source, self.flags)

    def secret_span(self, match: re.Match[str]) -> tuple[int, int]:
        for name in self.groups:
            if match.group(name) is not None:
                return match.span(name)
        return match.span()


# Values that stand for a secret without being one: what documentation and examples write.
_PLACEHOLDER = re.compile(
    r"""^(?:
        [*x.#-]{3,}                      # ****, xxxx, ...
      | <[^>]*> | \$\{[^}]*\} | \$\w+ | \{\{?[^}]*\}?\} | %\(?\w*\)?s   # <your-key>, ${VAR}, $VAR, {x}, %s
      | \[redacted:[\w-]+\] | \[private\]
      | (?:none|null|nil|true|false|undefined|changeme|redacted|secret|password|example|dummy)
      | .*(?:\.\.\.|…).*                # sk-...
      | .*\b(?:your|my)[\w-]*(?:key|token|secret|password)\b.*   # your-key-here, my_api_token
      | .*[-_]                           # a bare prefix: sk-proj-
      | .*\bno[-_]?key\b.*                # sk-no-key-required
    )$""",
    re.I | re.X,
)
_ATTRIBUTE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")  # self.token, os.environ


def _value_is_literal(match: re.Match[str]) -> bool:
    quoted, bare = match.group("quoted"), match.group("bare")
    value = quoted if quoted is not None else bare
    if value is None or is_placeholder(value) or value.startswith(MARKER_PREFIX):
        return False
    if quoted is not None:
        return literal(value)
    if _ATTRIBUTE.match(bare):
        return False
    # A bare word is a secret when it mixes letters and digits (hunter2, 9f8e...), or is long
    # and mixed (a base64 blob); a bare word of letters is an identifier or a type name.
    has_digit = any(c.isdigit() for c in bare)
    has_alpha = any(c.isalpha() for c in bare)
    kinds = sum((any(c.islower() for c in bare), any(c.isupper() for c in bare), has_digit, not bare.isalnum()))
    return (has_digit and has_alpha) or (len(bare) >= 16 and kinds >= 3)


def literal(value: str) -> bool:
    """A quoted or structured value that can be a secret: one word of 6 or more characters, not a
    placeholder or a template. Prose ("create a bearer token") is not; a passphrase with spaces is
    left to `<private>` tags or an extra rule."""
    return (
        len(value) >= 6
        and not any(c.isspace() for c in value)
        and "{" not in value
        and "}" not in value
        and not is_placeholder(value)
        and not value.startswith(MARKER_PREFIX)
    )


def is_placeholder(value: str) -> bool:
    """Documentation's stand-ins for a secret (`your-key-here`, `sk-...`, `<token>`): never redacted."""
    return bool(_PLACEHOLDER.match(value.strip()))


_SECRET_WORDS = (
    r"(?:password|passwd|passphrase|secret|secret[_-]?key|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|client[_-]?secret|token|auth[_-]?token|access[_-]?token|refresh[_-]?token)"
)
# A name that ends in a secret word: `password`, `DB_PASSWORD`, `aws.secret_key`, `OM_HTTP_TOKEN`.
SECRET_NAME = re.compile(rf"^(?:[A-Za-z0-9]+[_.-])*{_SECRET_WORDS}$", re.I)

_ASSIGNMENT = rf"""(?<![\w.-])(?:[A-Za-z0-9]+[_.-])*{_SECRET_WORDS}   # the name
        ["']?\s*(?::=|=>|=|:)\s*                                 # = : := =>, after a quoted key too
        (?:(?P<q>["'])(?P<quoted>[^"'\n]{{6,200}})(?P=q)
          |(?P<bare>[^\s"'`,;()\[\]{{}}<>]{{6,200}})(?![\w(\[.]))"""

RULES: tuple[Rule, ...] = (
    Rule(
        "private-key",
        # A key cut short (a truncated tool output) is redacted to the end of the text.
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.S,
        hints=("private key",),
    ),
    Rule("aws-access-key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b", hints=("akia", "asia", "abia", "acca")),
    Rule(
        "aws-secret-key",
        r"(?i)\baws[\w.-]{0,20}?(?:secret|sk)[\w.-]{0,20}[\"']?\s*[:=]\s*[\"']?"
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        groups=("secret",),
        hints=("aws",),
    ),
    Rule("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])", hints=("aiza",)),
    Rule(
        "github-token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
        hints=("gh", "github_pat_"),
    ),
    Rule("gitlab-token", r"\bglpat-[A-Za-z0-9_-]{20,}(?![A-Za-z0-9_-])", hints=("glpat-",)),
    Rule(
        "slack-token",
        r"\bxox[abposr]-[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+\b"
        r"|https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+",
        hints=("xox", "hooks.slack.com"),
    ),
    Rule("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}\b", hints=("_live_", "_test_")),
    Rule("anthropic-key", r"\bsk-ant-(?:api|admin|oat)\d{2}-[A-Za-z0-9_-]{32,}(?![A-Za-z0-9_-])", hints=("sk-ant-",)),
    Rule("openai-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}(?![A-Za-z0-9_-])", hints=("sk-",)),
    Rule("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b", hints=("npm_",)),
    Rule("pypi-token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}", hints=("pypi-",)),
    Rule("jwt", r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*", hints=("eyj",)),
    Rule(
        "bearer-header",
        r"(?i)\bbearer\s+(?P<token>[A-Za-z0-9._~+/-]{16,}=*)(?![A-Za-z0-9._~+/=-])"
        r"|\bauthorization[\"']?\s*[:=]\s*[\"']?basic\s+(?P<basic>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])",
        groups=("token", "basic"),
        hints=("bearer", "basic"),
    ),
    Rule(
        "url-password",
        r"(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@'\"<>]{1,100}:(?P<secret>[^\s:/@'\"<>]{3,200})@",
        groups=("secret",),
        hints=("://",),
    ),
    Rule(
        "secret-assignment",
        _ASSIGNMENT,
        re.I | re.X,
        groups=("quoted", "bare"),
        hints=("pass", "secret", "key", "token"),
        check=_value_is_literal,
    ),
)

NAMES: frozenset[str] = frozenset(rule.name for rule in RULES)
RULE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")


def extra_rule(name: str, pattern: str) -> Rule:
    """A rule from the configuration: the whole match is the secret, or its group named `secret`."""
    groups = ("secret",) if "secret" in re.compile(pattern).groupindex else ()
    return Rule(name, pattern, groups=groups)
