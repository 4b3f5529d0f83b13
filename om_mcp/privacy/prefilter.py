"""Which rules can match a text, found in one pass: the cheap step before the detectors.

Every rule names literal keywords, one of which occurs (lower-cased) in each of its
matches (`ghp_` for GitHub tokens, `://` for passwords in URLs). One regular expression
of all the keywords runs over the lower-cased text; only the rules whose keyword it saw
run their own expression. A text that holds none costs that one search.

The expression is the keywords as a trie (`s(?:k(?:-|_live_)|...)`), so each position of
the text costs one branch per character rather than one per keyword. It reports matches
that do not overlap, the longest at each position; a keyword that can hide inside one it
found (`sk-` in `sk-ant-`) or start inside it (`secre[t]oken`) is then confirmed with `in`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from om_mcp.privacy.rules import Rule


def trie(words: Iterable[str]) -> str:
    """A regular expression matching any of `words`, as a trie: at most one branch per character."""
    root: dict[str, dict] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict[str, dict]) -> str:
        branches = [re.escape(char) + build(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:  # a word ends here and longer ones go on
            return f"(?:{body})?"
        return body

    return build(root)


def _can_hide(found: str, other: str) -> bool:
    """Can an occurrence of `other` lie inside, or start inside, an occurrence of `found`?"""
    return other != found and (other in found or any(found.endswith(other[:n]) for n in range(1, len(other))))


class Prefilter:
    def __init__(self, rules: Sequence[Rule]):
        self.rules = tuple(rules)
        self.always = frozenset(i for i, rule in enumerate(self.rules) if not rule.keywords)
        self._rules_of: dict[str, set[int]] = {}
        for index, rule in enumerate(self.rules):
            for keyword in rule.keywords:
                self._rules_of.setdefault(keyword, set()).add(index)
        self._hidden: dict[str, tuple[str, ...]] = {}  # worked out for a keyword the first time it is found
        self._cache: dict[frozenset[str], list[Rule]] = {}
        self._search = re.compile(trie(self._rules_of)) if self._rules_of else None

    def _can_hide(self, keyword: str) -> tuple[str, ...]:
        hidden = self._hidden.get(keyword)
        if hidden is None:
            hidden = self._hidden[keyword] = tuple(o for o in self._rules_of if _can_hide(keyword, o))
        return hidden

    def candidates(self, lowered: str) -> list[Rule]:
        """The rules that can match a text (given lower-cased), in their order."""
        found = set(self._search.findall(lowered)) if self._search is not None else set()
        for keyword in list(found):
            found.update(other for other in self._can_hide(keyword) if other not in found and other in lowered)
        if not found and not self.always:
            return []
        key = frozenset(found)
        rules = self._cache.get(key)
        if rules is None:
            indexes = self.always.union(*(self._rules_of[k] for k in found))
            rules = self._cache[key] = [self.rules[i] for i in sorted(indexes)]
            if len(self._cache) > 4096:  # the same few sets of keywords come back: keep them, bounded
                self._cache.clear()
        return rules
