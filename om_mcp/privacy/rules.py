"""The built-in secret detectors, matched before anything is stored: each a named rule (some
names cover several expressions, one per prefix: `service-token`, `secret-assignment`).

A match becomes `[redacted:<rule>]`. Where a rule names the part that is secret (the
value of `password=...`, the token after `Bearer`), only that part is replaced, so
the text still reads ("password=[redacted:secret-assignment]"). Each rule is tested
against positive and negative examples in tests/test_privacy.py, against random
tokens of its own shape, and the whole set against the repository's own source and
tests, where it must not fire on ordinary code.

Where the rules come from: gitleaks' rule set (config/gitleaks.toml) and detect-secrets'
plugins, the two that people already trust. Every rule of theirs that names a provider by a
fixed prefix (cloud keys, VCS tokens, chat, payment and AI providers, package registries)
is here as a prefix; their private-key, JWT, basic-auth and keyword rules are here as
`private-key`, `jwt`, `url-password`/`bearer-header`/`cli-password` and `secret-assignment`.
Their rules that need a provider's name nearby (`adobe ... = <32 hex>`) are covered when the
name ends in a secret word (`ADOBE_CLIENT_SECRET=...`), as it does in practice.
`benchmarks/secret_rules.py` measures that coverage rule by rule. Neither library is used
as such: gitleaks is a Go program, and detect-secrets runs each of its plugins over every
line and adds high-entropy detectors that fire on hashes and ids in ordinary code.

Why these shapes:
- Provider keys have fixed prefixes (AKIA, ghp_, xoxb-, sk-ant-): matched exactly.
- `password=`/`secret=` assignments are the common leak with no prefix (.env files,
  command lines, config dumps). To stay quiet on code, the name must *end* in a secret
  word (`db_password`, `OM_HTTP_TOKEN`, `PGPASSWORD`, `apiKey`; not `max_tokens`,
  `tokenizer`, `password_file`), and the value must look like a literal: quoted, or a
  bare word with letters and digits that is not a call, an attribute, a type, a path or
  a placeholder.
- `keywords` are lower-case literals one of which occurs in every match of the rule.
  They are what the prefilter looks for (privacy/prefilter.py): one regular expression of
  all of them finds which rules can match a text, and only those run.
  A rule's expression is compiled the first time a text needs it: the host hook runs in a
  new process on every prompt, and compiling all of them up front costs it 20 ms.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache, cached_property

from om_mcp.privacy.words import reads_as_words

MARKER_PREFIX = "[redacted:"


class Lazy:
    """A regular expression compiled the first time it is used: the host hook is a new process on
    every prompt, and most of these are needed only once a secret-looking match is found."""

    def __init__(self, source: str, flags: int = 0):
        self.source, self.flags = source, flags

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.source, self.flags)

    def match(self, text: str) -> re.Match[str] | None:
        return self.compiled.match(text)

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.search(text, pos, endpos)

    def sub(self, replacement: str, text: str) -> str:
        return self.compiled.sub(replacement, text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(text)


def marker(rule: str) -> str:
    return f"{MARKER_PREFIX}{rule}]"


Check = Callable[[re.Match[str], str], bool]  # (the match, the original text): is it a secret?


@dataclass(frozen=True)
class Rule:
    name: str
    source: str  # the regular expression
    flags: int = 0
    groups: tuple[str, ...] = ()  # the first of these that matched is the secret; none: the whole match
    keywords: tuple[str, ...] = ()  # lower-case literals, one of which is in every match; none: always run
    check: Check | None = field(default=None, compare=False)
    starts_word: bool = False  # a match must not follow a letter, digit or `_`

    @cached_property
    def lowered(self) -> bool:
        """A case-insensitive rule runs, case-sensitively, over the lower-cased text: three times faster."""
        return bool(self.flags & re.I)

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.source, self.flags)

    @cached_property
    def lower_pattern(self) -> re.Pattern[str]:
        return re.compile(self.source, self.flags & ~re.I)

    def secret_span(self, match: re.Match[str]) -> tuple[int, int]:
        for name in self.groups:
            if match.group(name) is not None:
                return match.span(name)
        return match.span()


def _classes(value: str) -> int:
    """How many of lower case, upper case and digits a value mixes."""
    return sum((any(c.islower() for c in value), any(c.isupper() for c in value), any(c.isdigit() for c in value)))


def _mixed(match: re.Match[str], text: str) -> bool:
    """A random token mixes two of lower, upper and digits after its prefix; kebab-case words
    (`sk-learn-...`) do not."""
    return _classes(re.split(r"[-.]", match.group(0), maxsplit=1)[-1]) >= 2


# -- placeholders: what documentation and examples write instead of a secret -------------------

# Every rule's prefix, which documentation shows bare (`OPENAI_API_KEY=sk-proj-`), and those of
# the rules that match more than a prefix.
_EXTRA_PREFIXES = ("sk-proj-", "sk-svcacct-", "sk-admin-", "sk-ant-api03-", "sk-ant-admin01-", "github_pat_")
_PLACEHOLDER = Lazy(
    r"""^(?:
        [*x.#_-]{3,} | \*{3,}[^*]{0,6}                # ****, xxxx, ****abcd (a masked key shows its end)
      | <[^>]*> | \$\{[^}]*\} | \$\(?\w+\)? | \{\{?[^}]*\}?\} | %\(?\w*\)?s   # <your-key>, ${VAR}, $VAR, {x}, %s
      | \[redacted:[\w-]+\] | \[private\]
      | (?:none|null|nil|true|false|undefined|changeme|redacted|secret|password|passwd|pass|pwd|pw|user
         |username|token|apikey|api_key|example|dummy|sample|placeholder|test|xxx
         |string|str|required|optional|hidden|masked|sensitive|encrypted|text|varchar|boolean|integer)
      | .*\b(?:your|my)[\w-]*(?:key|token|secret|password)\b.*   # your-key-here, my_api_token
      | .*\bno[-_]?key\b.*                                        # sk-no-key-required
      | (?:[a-z0-9]{1,12}[-_])*(?:example|placeholder|dummy|fake|sample)(?:[-_][a-z0-9]{1,12})*   # sk-example-key
    )$""",
    re.I | re.X,
)
_ELLIPSIS = Lazy(r"\.\.\.|…")


def is_placeholder(value: str) -> bool:
    """Documentation's stand-ins for a secret (`your-key-here`, `sk-...`, `<token>`, a bare prefix,
    `ghp_xxxx...`): never redacted. A random token is none of these, whatever it ends with."""
    value = value.strip()
    if not value or _PLACEHOLDER.match(value):
        return True
    lowered = value.lower()
    prefix = next((p for p in known_prefixes() if lowered.startswith(p)), "")
    rest = value[len(prefix) :]
    if prefix and (not rest or len(set(rest)) == 1):
        return True  # nothing but a prefix (`sk-proj-`), or a prefix and one character repeated (`ghp_xxxx`)
    # an ellipsis stands in for most of it: `sk-...`, `sk-...Xy9z`, `ghp_…`
    return bool(_ELLIPSIS.search(value)) and len(_ELLIPSIS.sub("", value)) < 16


# -- secret-assignment: a name that ends in a secret word, and a literal value ------------------

# Words that make a name secret wherever they end it (`PGPASSWORD`, `GITHUBTOKEN`, `clientSecret`);
# the weaker ones only after a separator or a camel-case step (`DB_PASS`, `apiKey`, `X-Auth`),
# or after a word that makes them secret (`APIKEY`, `SECRETKEY`).
_STRONG = ("password", "passwd", "passphrase", "secret", "token", "credentials", "credential", "creds")
_WEAK = ("pass", "pwd", "key", "auth")
_COMPOUND = ("api", "secret", "access", "private", "master", "signing", "encryption", "license", "auth", "client")
# Names that end in a secret word and name something else.
_NOT_SECRET_NAMES = Lazy(
    r"(?:public|publishable|primary|foreign|sort|partition|range|hash|row|cache|lookup|dict|map|group|index|unique"
    r"|idempotency|i18n|translation|message|object|s3|file|next|page|continuation|cursor|csrf|xsrf|hot|short|"
    r"shortcut|sign|max|min|num|count|total|input|output|prompt|completion)[_.-]?(?:key|token)$",
    re.I,
)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


_ENDINGS = frozenset(word[-3:] for word in (*_STRONG, *_WEAK))


def secret_word(name: str, word_start: int | None = None) -> str | None:
    """The secret word a name ends in (`db_password` -> "password"), or None: the name is not secret."""
    lowered = name.lower().rstrip("\"'\\")
    if lowered[-3:] not in _ENDINGS:  # most names: one look
        return None
    name = name[: len(lowered)]
    for word in (*_STRONG, *_WEAK):
        if not lowered.endswith(word):
            continue
        start = len(name) - len(word) if word_start is None else word_start
        before = lowered[:start]
        if _NOT_SECRET_NAMES.search(lowered):
            return None
        if word in _STRONG or not before:
            return word
        step = before[-1] in "_.- 0123456789" or (name[start - 1].islower() and name[start].isupper())
        if step or before.rstrip("_.-").endswith(_COMPOUND):
            return word
        return None
    return None


_ATTRIBUTE = Lazy(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")  # self.token, os.environ
_SLUG = Lazy(r"^[a-z0-9._-]+(?:/[a-z0-9._-]+)+$")  # gemini/gemini-2.5-flash, org/repo: a name
_PATH = Lazy(r"^(?:~|\.{1,2})?/|^[A-Za-z]:\\|://")


def literal(value: str, word: str = "password") -> bool:
    """A value that can be a secret: one word of 6 or more characters (10 after a weak word such
    as `key` or `token`, random-looking and not a name made of words: `userApiKey`), not a
    placeholder, a template, a path or a URL. Prose ("create a bearer token") is not; a passphrase
    with spaces is left to `<private>` tags or an extra rule."""
    if (
        len(value) < 6
        or any(c.isspace() for c in value)
        or "{" in value
        or "}" in value
        or value.startswith(MARKER_PREFIX)
        or _PATH.search(value)
        or is_placeholder(value)
    ):
        return False
    if word in ("password", "passwd", "passphrase", "secret", "credentials", "credential", "creds", "pass", "pwd"):
        return True
    if len(value) < 10 or not _random(value) or _SLUG.match(value):
        return False
    return _key_prefixed(value) or not reads_as_words(value)


def _key_prefixed(value: str) -> bool:
    """A provider's prefix and a digit after it (`sk-ant-api03-realkey123`): a key, however wordy."""
    lowered = value.lower()
    return any(
        lowered.startswith(p) and any(c.isdigit() for c in value[len(p) :]) for p in known_prefixes() if p[-1] in "-_."
    )


_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def _random(value: str) -> bool:
    """Letters and digits together (hunter2, 9f8e...), or both cases over 12 letters, or long and
    mixed (a base64 blob), or 12 characters of a key's alphabet that do not read as words
    (`qkvhzpwlxrbm`: one case alone is no proof of a word)."""
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    lower, upper = any(c.islower() for c in value), any(c.isupper() for c in value)
    kinds = sum((lower, upper, has_digit, not value.isalnum()))
    if (has_digit and has_alpha) or (len(value) >= 12 and lower and upper) or (len(value) >= 16 and kinds >= 3):
        return True
    return len(value) >= 12 and set(value) <= _KEY_CHARS and not reads_as_words(value)


def _assignment(match: re.Match[str], text: str) -> bool:
    """The name ends in a secret word (read back from the word to the name's start) and the value
    is a literal; a value after a space only for a command-line flag or `password is ...`. The
    match is in the lower-cased text; case is read from the original."""

    def group(name: str) -> str | None:
        start, end = match.span(name)
        return None if start < 0 else text[start:end]

    begin = start = match.start()
    while begin > 0 and text[begin - 1] in _NAME_CHARS:
        begin -= 1
    name = text[begin : match.end("word")]
    word = secret_word(name, start - begin)
    if word is None:
        return False
    op = match.group("op").strip(" \t\"'\\")
    if not op and not name.startswith("-"):
        return False  # a value after a space: only a flag's (`--password <value>`)
    if op in ("is", "was") and word not in ("password", "passwd", "passphrase", "pwd", "pass"):
        return False
    quoted = group("quoted")
    if op.endswith(","):  # setenv("TOKEN", "..."): a quoted value, and not the next key of an object
        if quoted is None or text[match.end() : match.end() + 40].lstrip().startswith(":"):
            return False
    if quoted is not None:
        return literal(quoted, word)
    bare = group("bare") or ""
    return not _ATTRIBUTE.match(bare) and literal(bare, word) and _random(bare)


def _assignment_source(word: str) -> str:
    return rf"""
    (?P<word>{word})(?![a-z0-9])                             # the end of a name: read back in the check
    (?P<op>\\?["']?\]?[ \t]*                                   # after a quoted key, or an index: ["TOKEN"]
           (?::?[ \t]*(?:string|str)[ \t]*=                       # a typed declaration: `x: str =`, `x string =`
           |:{{1,3}}=|=>|==?|\.=|\?\?=|\|\|=|:                  # = := ::= => == .= ??= ||= :
           |(?<=["'])[ \t]*,)[ \t]*                           # a quoted name, a comma: setenv("TOKEN", ...)
          |[ \t]+(?:is|was)[ \t]+ | [ \t]+)                  # `password is ...`, `--password ...`
    (?:\\?(?P<q>["'`])(?P<quoted>[^"'`\n\\]{{6,200}})\\?(?P=q)
      |(?P<bare>[^\s"'`,;&()\[\]{{}}<>\\]{{5,199}}[^\s"'`,;&()\[\]{{}}<>\\.])   # a full stop after it ends a sentence
       (?![\w(\[]|\.[\w(\[]))                                  # not a prefix of a word, a call, an attribute
    """


# One expression per secret word, each led by its literal (searched for by it), under one name.
_ASSIGNMENTS = (  # (keyword, the words it leads)
    ("pass", "pass(?:phrase|word|wd)?"),
    ("pwd", "pwd"),
    ("secret", "secret"),
    ("token", "token"),
    ("cred", "cred(?:entials?|s)"),
    ("key", "key"),
    ("auth", "auth"),
)
_SECRET_TAG = r"[\w.-]{0,40}(?:password|passwd|secret|token|apikey|api_key|api-key)"
_ELEMENT = rf"<(?P<tag>{_SECRET_TAG})>\s*(?P<element>[^<\s]{{6,200}})\s*</(?P=tag)>"  # <apiToken>...</apiToken>
_ATTRIBUTES = rf"""(?:key|name)=["']{_SECRET_TAG}["']\s+value=["'](?P<element>[^"'\s]{{6,200}})["']"""  # <add key=...

# -- the rules ------------------------------------------------------------------------------------

_END = r"(?![A-Za-z0-9_-])"
# Providers whose tokens carry a fixed prefix (gitleaks' rules of that kind and detect-secrets'
# plugins): the long tail, one rule. (prefix as it is written, its keyword, what follows it)
_SERVICE_TOKENS = (
    (r"ops_eyJ", "ops_eyj", r"[a-zA-Z0-9+/]{250,}={0,3}"),  # 1Password service account
    (r"A3-[A-Z0-9]{6}-", "a3-", r"(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}"),
    (r"AKCp", "akcp", r"[A-Za-z0-9]{69}"),  # Artifactory
    (r"cmVmd", "cmvmd", r"[A-Za-z0-9]{59}"),  # Artifactory reference token
    (r"4b1d", "4b1d", r"[A-Za-z0-9]{38}"),  # ClickHouse Cloud
    (r"CLOJARS_", "clojars_", r"[a-zA-Z0-9]{60}"),
    (r"dapi", "dapi", r"[a-f0-9]{32}(?:-\d)?"),  # Databricks
    (r"do[opr]_v1_", "_v1_", r"[a-f0-9]{64}"),  # DigitalOcean
    (r"dp\.(?:pt|st|sa|ct|scim|audit)\.", "dp.", r"[a-zA-Z0-9]{40,44}"),  # Doppler
    (r"dt0c01\.", "dt0c01.", r"[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),  # Dynatrace
    (r"duffel_(?:test|live)_", "duffel_", r"[A-Za-z0-9_=-]{43}"),
    (r"EZAK", "ezak", r"[A-Za-z0-9]{54}"),  # EasyPost
    (r"EZTK", "eztk", r"[A-Za-z0-9]{54}"),
    (r"EAAM", "eaam", r"[A-Za-z0-9]{100,}"),  # Facebook page token
    (r"EAAC", "eaac", r"[A-Za-z0-9]{100,}"),
    (r"FLWSECK_TEST-", "flwseck_test-", r"[a-hA-H0-9]{12,32}(?:-X)?"),  # Flutterwave
    (r"FLWPUBK_TEST-", "flwpubk_test-", r"[a-hA-H0-9]{32}-X"),
    (r"fo1_", "fo1_", r"[\w-]{43}"),  # Fly.io
    (r"fm1[ar]_", "fm1", r"[a-zA-Z0-9+/]{100,}={0,3}"),
    (r"fm2_", "fm2_", r"[a-zA-Z0-9+/]{100,}={0,3}"),
    (r"fio-u-", "fio-u-", r"[A-Za-z0-9_=-]{64}"),  # Frame.io
    (r"glc_", "glc_", r"[A-Za-z0-9+/]{32,400}={0,3}"),  # Grafana Cloud
    (r"glsa_", "glsa_", r"[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    (r"eyJrIjoi", "eyjrijoi", r"[A-Za-z0-9]{70,400}={0,3}"),
    (r"[a-z0-9]{14}\.atlasv1\.", "atlasv1", r"[a-z0-9_=-]{60,70}"),  # Terraform Cloud
    (r"hvs\.", "hvs.", r"[\w-]{90,300}"),  # Vault
    (r"hvb\.", "hvb.", r"[\w-]{138,300}"),
    (r"HRKU-AA", "hrku-aa", r"[0-9a-zA-Z_-]{58}"),  # Heroku
    (r"ico-", "ico-", r"[a-zA-Z0-9]{32}"),  # Infracost
    (r"s-s4t2(?:ud|af)-", "s-s4t2", r"[a-f0-9]{64}"),  # 42 Intra
    (r"lin_api_", "lin_api_", r"[A-Za-z0-9]{40}"),  # Linear
    (r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk", "_mmk", r""),  # MaxMind
    (r"NRAK-", "nrak-", r"[A-Za-z0-9]{27}"),  # New Relic
    (r"NRII-", "nrii-", r"[A-Za-z0-9-]{32}"),
    (r"ntn_", "ntn_", r"[0-9]{11}[A-Za-z0-9]{35}"),  # Notion
    (r"secret_", "secret_", r"[A-Za-z0-9]{43}"),  # Notion (older)
    (r"API-", "api-", r"[A-Z0-9]{26}"),  # Octopus Deploy
    (r"sha256~", "sha256~", r"[\w-]{43}"),  # OpenShift
    (r"pscale_(?:tkn|oauth|pw)_", "pscale_", r"[\w=.-]{32,64}"),  # PlanetScale
    (r"PMAK-", "pmak-", r"[A-Fa-f0-9]{24}-[A-Fa-f0-9]{34}"),  # Postman
    (r"pnu_", "pnu_", r"[a-zA-Z0-9]{36}"),  # Prefect
    (r"pul-", "pul-", r"[a-f0-9]{40}"),  # Pulumi
    (r"rdme_", "rdme_", r"[a-z0-9]{70}"),  # ReadMe
    (r"rubygems_", "rubygems_", r"[a-f0-9]{48}"),
    (r"oy2", "oy2", r"[a-z0-9]{43}"),  # NuGet
    (r"tk-us-", "tk-us-", r"[\w-]{48}"),  # Scalingo
    (r"SG\.", "sg.", r"[A-Za-z0-9=_.-]{66}"),  # SendGrid
    (r"xkeysib-", "xkeysib-", r"[a-f0-9]{64}-[A-Za-z0-9]{16}"),  # Brevo
    (r"sntry[su]_", "sntry", r"[A-Za-z0-9+/=_]{64,}"),  # Sentry
    (r"sm_aat_", "sm_aat_", r"[a-zA-Z0-9]{16}"),  # SettleMint
    (r"sm_pat_", "sm_pat_", r"[a-zA-Z0-9]{16}"),
    (r"sm_sat_", "sm_sat_", r"[a-zA-Z0-9]{16}"),
    (r"shippo_(?:live|test)_", "shippo_", r"[a-fA-F0-9]{40}"),
    (r"shpat_", "shpat_", r"[a-fA-F0-9]{32}"),  # Shopify
    (r"shpca_", "shpca_", r"[a-fA-F0-9]{32}"),
    (r"shppa_", "shppa_", r"[a-fA-F0-9]{32}"),
    (r"shpss_", "shpss_", r"[a-fA-F0-9]{32}"),
    (r"sq0atp-", "sq0atp-", r"[\w-]{22,60}"),  # Square
    (r"sq0csp-", "sq0csp-", r"[\w-]{43}"),
    (r"EAAA", "eaaa", r"[\w-]{22,60}"),
    (r"SK", "sk", r"[0-9a-fA-F]{32}"),  # Twilio API key
    (r"sgp_", "sgp_", r"(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}"),  # Sourcegraph
    (r"tfp_", "tfp_", r"[A-Za-z0-9_.=-]{59}"),  # Typeform
    (r"AQVN", "aqvn", r"[A-Za-z0-9_-]{35,38}"),  # Yandex
    (r"t1\.", "t1.", r"[A-Z0-9a-z_-]+={0,2}\.[A-Z0-9a-z_-]{86}={0,2}"),
    (r"p8e-", "p8e-", r"[A-Za-z0-9]{32}"),  # Adobe
    (r"LTAI", "ltai", r"[A-Za-z0-9]{20}"),  # Alibaba
    (r"pat[A-Za-z0-9]{14}\.", "pat", r"[a-f0-9]{64}"),  # Airtable
    (r"pat\.[A-Za-z0-9_-]{22}\.", "pat.", r"[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"),  # Harness
    (r"sat\.[A-Za-z0-9_-]{22}\.", "sat.", r"[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"),
    (r"dnkey-", "dnkey-", r"[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52}"),  # Defined Networking
    (r"v1\.0-[a-f0-9]{24}-", "v1.0-", r"[a-f0-9]{146}"),  # Cloudflare origin CA
    (
        r"(?:sc|ext|scauth|authress)_[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}\.acc[_-]",
        ".acc",
        r"[A-Za-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120}",
    ),
    (
        r"BUNDLE_(?:ENTERPRISE|GEMS)__CONTRIBSYS__COM",
        "__contribsys__com",
        r"[ \t]*[=:][ \t]*['\"]?[a-f0-9]{8}:[a-f0-9]{8}",
    ),
    (r"sk\.eyJ", "sk.eyj", r"[A-Za-z0-9_-]{50,}\.[A-Za-z0-9_-]{20,}"),  # Mapbox secret token
    (r"[a-f0-9]{32}-us", "-us", r"\d{1,2}"),  # Mailchimp
    (r"[A-Za-z0-9_~.]{3}\dQ~", "q~", r"[A-Za-z0-9_~.-]{31,34}"),  # Azure AD client secret
)


_ARG = r"[^\s\"',;`]{3,200}"  # one argument on a command line


def _url_scheme(match: re.Match[str], text: str) -> bool:
    """`user:password@` follows a URL's scheme (read back from its `://`)."""
    return _SCHEME.search(text, 0, match.start()) is not None


_SCHEME = Lazy(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,20}\Z")


def _prefixed(name: str, source: str, *keywords: str, flags: int = 0) -> Rule:
    """A token that starts a word with a fixed prefix. (The boundary is checked after the match,
    not with a leading `\b`: a pattern that starts with its literal is searched for by that
    literal, a hundred times faster.)"""
    return Rule(name, source + _END, flags, keywords=keywords, starts_word=True)


RULES: tuple[Rule, ...] = (
    Rule(
        "private-key",
        # A key cut short (a truncated tool output) is redacted to the end of the text.
        r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.S,
        keywords=("private key",),
    ),
    Rule(
        "private-key", r"PuTTY-User-Key-File-\d:.*?(?:Private-MAC:[ \t]*[0-9a-f]+|\Z)", re.S, keywords=("putty-user",)
    ),
    _prefixed("private-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", "age-secret-key-1"),
    _prefixed(
        "aws-access-key", r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}", "a3t", "akia", "asia", "abia", "acca"
    ),
    _prefixed("aws-access-key", r"ABSK[A-Za-z0-9+/]{109,269}={0,2}", "absk"),  # Bedrock
    _prefixed("aws-access-key", r"bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=%&-]*", "bedrock-api-key-"),
    Rule(
        "aws-secret-key",
        r"aws[\w.-]{0,20}?(?:secret|sk|key|password|pwd|token)[\w.-]{0,20}\\?[\"']?\s*[:=]+>?\s*\\?[\"']?"
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        re.I,
        groups=("secret",),
        keywords=("aws",),
    ),
    _prefixed("google-api-key", r"AIza[0-9A-Za-z_-]{35}", "aiza"),
    _prefixed("google-api-key", r"GOCSPX-[A-Za-z0-9_-]{28}", "gocspx-"),  # OAuth client secret
    _prefixed("google-api-key", r"ya29\.[0-9A-Za-z_-]{30,}", "ya29."),  # OAuth access token
    Rule(
        "azure-key",
        r"(?:accountkey|sharedaccesskey)=(?P<secret>[A-Za-z0-9+/]{43,86}={0,2})",
        re.I,
        groups=("secret",),
        keywords=("accountkey=", "sharedaccesskey="),
    ),
    _prefixed("github-token", r"gh[pousr]_[A-Za-z0-9]{36,255}", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    _prefixed("github-token", r"github_pat_[A-Za-z0-9_]{22,255}", "github_pat_"),
    _prefixed(
        "gitlab-token",
        r"gl(?:pat|dt|ft|soat|rt|ffct|imt|ptt|agent|oas|cbt)-[\w-]{20,300}(?:\.[0-9a-z]{9})?",
        *("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glffct-", "glimt-", "glptt-", "glagent-", "gloas-"),
        "glcbt-",
    ),
    _prefixed("gitlab-token", r"GR1348941[\w-]{20,}", "gr1348941"),
    Rule("gitlab-token", r"_gitlab_session=[0-9a-z]{32}", keywords=("_gitlab_session=",)),
    _prefixed(
        "slack-token",
        r"xox[abposre](?:\.xox[bp])?-(?=[A-Za-z0-9-]{10})[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*",
        *("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe"),
    ),
    _prefixed("slack-token", r"xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+", "xapp-"),
    Rule(
        "slack-token",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{20,}",
        keywords=("hooks.slack.com",),
    ),
    _prefixed("stripe-key", r"sk_(?:live|test|prod)_[0-9A-Za-z]{10,99}", "sk_live_", "sk_test_", "sk_prod_"),
    _prefixed("stripe-key", r"rk_(?:live|test|prod)_[0-9A-Za-z]{10,99}", "rk_live_", "rk_test_", "rk_prod_"),
    _prefixed("stripe-key", r"whsec_[A-Za-z0-9]{32,}", "whsec_"),
    _prefixed("anthropic-key", r"sk-ant-(?:api|admin|oat|sid)\d{2}-[A-Za-z0-9_-]{32,}", "sk-ant-"),
    Rule(
        # Also the other providers whose keys begin with sk- (DeepSeek, Moonshot, ...).
        "openai-key",
        rf"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{{32,}}{_END}",
        keywords=("sk-",),
        check=_mixed,
        starts_word=True,
    ),
    # Hugging Face, Groq, xAI, Replicate, Perplexity
    _prefixed("ai-key", r"hf_[A-Za-z]{34}", "hf_"),
    _prefixed("ai-key", r"api_org_[A-Za-z]{34}", "api_org_"),
    _prefixed("ai-key", r"gsk_[A-Za-z0-9]{52}", "gsk_"),
    _prefixed("ai-key", r"xai-[A-Za-z0-9]{80}", "xai-"),
    _prefixed("ai-key", r"r8_[A-Za-z0-9]{37}", "r8_"),
    _prefixed("ai-key", r"pplx-[A-Za-z0-9]{48}", "pplx-"),
    _prefixed("npm-token", r"npm_[A-Za-z0-9]{36}", "npm_"),
    _prefixed("pypi-token", r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[\w-]{50,}", "pypi-ag"),
    # Discord (bot tokens, webhooks), Telegram bots, Microsoft Teams webhooks
    _prefixed("chat-token", r"[MNO][A-Za-z\d_-]{23,25}\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27,38}", "discord"),
    Rule("chat-token", r"discord(?:app)?\.com/api/webhooks/\d+/[\w-]{60,}", keywords=("discord",)),
    _prefixed("chat-token", r"\d{8,10}:AA[0-9A-Za-z_-]{33}", ":aa"),
    Rule("chat-token", r"webhook\.office\.com/webhookb2/[\w@/-]{60,}", keywords=("webhook.office.com",)),
    # One rule each, under one name: the prefilter runs only the one whose prefix it saw.
    *(_prefixed("service-token", prefix + rest, keyword) for prefix, keyword, rest in _SERVICE_TOKENS),
    _prefixed("jwt", r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*", "eyj"),
    # gitleaks' looser shape: any JSON-ish header and payload (ey...) with a signature
    _prefixed("jwt", r"ey[A-Za-z0-9]{17,}\.ey[A-Za-z0-9/\\_-]{17,}\.(?:[A-Za-z0-9/\\_-]{10,}={0,2})?", "ey"),
    Rule("service-token", r"s\.[A-Za-z0-9]{24}" + _END, keywords=("s.",), check=_mixed, starts_word=True),  # Vault
    Rule(
        "bearer-header",
        r"bearer\s+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)(?![A-Za-z0-9._~+/=-])",
        re.I,
        groups=("secret",),
        keywords=("bearer",),
        starts_word=True,
    ),
    Rule(
        "bearer-header",
        r"authorization\\?[\"']?\s*[:=]\s*\\?[\"']?(?:basic|token|apikey|api-key|digest)\s+"
        r"(?P<secret>[A-Za-z0-9._~+/-]{8,}={0,2})(?![A-Za-z0-9+/=])",
        re.I,
        groups=("secret",),
        keywords=("authorization",),
        starts_word=True,
    ),
    Rule(
        "url-password",
        r"://[^\s:/@'\"<>]{0,100}:(?P<secret>[^\s:/@'\"<>]{3,200})@",
        groups=("secret",),
        keywords=("://",),
        check=_url_scheme,
    ),
    # curl -u <user>:<password>, sshpass -p <password>, mysql -p<password>, redis-cli -a <password>
    *(
        Rule("cli-password", source, groups=("secret",), keywords=(keyword,), starts_word=True)
        for keyword, source in (
            # a command continued over a few lines (`\` at their ends) too
            (
                "curl",
                rf"curl\b(?:.|\n){{0,300}}?\s(?:-u|--user)(?:=|[ \t]+)[\"']?[^\s:\"']{{0,100}}:(?P<secret>{_ARG})",
            ),
            ("sshpass", rf"sshpass\s+-p[ \t]*[\"']?(?P<secret>{_ARG})"),
            ("mysql", rf"mysql(?:dump|admin)?\b[^\n]*?\s-p(?P<secret>{_ARG})"),
            ("redis-cli", rf"redis-cli\b[^\n]*?\s-a[ \t]+[\"']?(?P<secret>{_ARG})"),
        )
    ),
    *(
        Rule("secret-assignment", _assignment_source(word), re.I | re.X, ("quoted", "bare"), (keyword,), _assignment)
        for keyword, word in _ASSIGNMENTS
    ),
    Rule(
        "secret-assignment",
        _ELEMENT,
        re.I,
        ("element",),
        ("password>", "passwd>", "secret>", "token>", "apikey>", "api_key>", "api-key>"),
        lambda match, text: literal(text[match.start("element") : match.end("element")]),
    ),
    Rule(
        "secret-assignment",
        _ATTRIBUTES,
        re.I,
        ("element",),
        ("key=", "name="),
        lambda match, text: literal(text[match.start("element") : match.end("element")]),
    ),
)

NAMES: frozenset[str] = frozenset(rule.name for rule in RULES)
RULE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")


@cache
def known_prefixes() -> tuple[str, ...]:
    """Every rule's prefix, longest first, and those of the rules that match more than a prefix."""
    keywords = {k for rule in RULES if rule.name != "secret-assignment" for k in rule.keywords if len(k) >= 3}
    return tuple(sorted(keywords | set(_EXTRA_PREFIXES), key=len, reverse=True))


def extra_rule(name: str, pattern: str) -> Rule:
    """A rule from the configuration: the whole match is the secret, or its group named `secret`."""
    groups = ("secret",) if "secret" in re.compile(pattern).groupindex else ()
    return Rule(name, pattern, groups=groups)
