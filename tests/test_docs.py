"""The README stays a page a newcomer finishes, and it and the docs pages point only at what is there:
every relative link names a file that exists (and a heading of it, when it names one), and every figure
of the benchmarks page names the script that measures it."""

from __future__ import annotations

import re
from pathlib import Path

from support.processes import REPO

README_MAX_LINES = 250
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)}


def broken_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        found = (page.parent / path).resolve() if path else page
        if not found.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and found.suffix == ".md" and anchor not in anchors(found):
            broken.append(f"{page.name}: {target} (no such heading in {found.name})")
    return broken


def test_the_readme_is_short_enough_to_finish() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"the README has {lines} lines: move reference material to a docs/ page"


def test_the_readme_and_the_docs_index_link_every_docs_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    assert "(docs/README.md)" in readme
    for page in sorted((REPO / "docs").glob("*.md")):
        if page.name != "README.md":
            assert f"({page.name})" in index, f"docs/README.md does not list {page.name}"


def test_every_relative_link_points_at_something_that_exists() -> None:
    checked = [target for page in PAGES for target in LINK.findall(page.read_text(encoding="utf-8"))]
    assert sum("docs/" in t for t in checked) >= 20  # the README's links to the docs were read at all
    broken = [problem for page in PAGES for problem in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_the_slug_is_githubs() -> None:
    assert slug("2. A layer for the person") == "2-a-layer-for-the-person"
    assert slug("Earlier sessions: `om-mcp ingest`") == "earlier-sessions-om-mcp-ingest"
    assert slug("What `--match` looks in") == "what---match-looks-in"


def test_every_figure_names_the_script_that_measures_it() -> None:
    text = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    table = text.split("\n## Figures\n", 1)[1].split("\n## ", 1)[0]
    rows = [row for row in table.splitlines() if row.startswith("| ") and not row.startswith("| benchmark ")]
    assert len(rows) >= 15
    for row in rows:
        scripts = re.findall(r"benchmarks/(\w+\.py)", row)
        assert scripts, f"no script named for: {row[:80]}"
        for script in scripts:
            assert (REPO / "benchmarks" / script).exists(), script


def test_every_benchmark_script_the_docs_name_exists() -> None:
    """(A path after `git show COMMIT:` is one read from history, not the tree.)"""
    script = re.compile(r"(?<![:\w/])benchmarks/(\w+\.py)")
    named = {s for page in PAGES for s in script.findall(page.read_text(encoding="utf-8"))}
    missing = sorted(s for s in named if not (REPO / "benchmarks" / s).exists())
    assert len(named) >= 15 and not missing, missing
