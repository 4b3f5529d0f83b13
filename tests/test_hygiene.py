"""What a clone of the project carries besides the code: the licence it declares, a changelog, the CI that runs
`.ci/run` within the versions the suite last passed with, an architecture page that names real modules, and no
pointer to a specification that is not in the repository."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from support.processes import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# Two or three capitals, a hyphen and digits: the shape of the old spec's requirement ids, minus the real
# names that share it.
REQUIREMENT_ID = re.compile(r"\b[A-Z]{2,3}-[0-9]{1,3}\b")
NOT_IDS = {"UTF-8", "UTF-16", "UTF-32", "CRC-32", "SHA-256", "GPT-5", "PDF-1", "KEY-1"}  # KEY-1: age's AGE-SECRET-KEY-1


def test_the_licence_is_the_one_pyproject_declares() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the whole text, not a stub


def test_no_requirement_id_points_outside_the_repository() -> None:
    found = []
    for folder in ("om_mcp", "tests", "benchmarks"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                ids = set(REQUIREMENT_ID.findall(line)) - NOT_IDS
                if ids:
                    found.append(f"{path.relative_to(REPO)}:{number}: {sorted(ids)}")
    assert not found, "say what the requirement is instead of its id:\n" + "\n".join(found)


def test_the_changelog_keeps_an_unreleased_section() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    assert "Keep a Changelog" in text and "\n## [Unreleased]\n" in text
    version = PYPROJECT["project"]["version"]
    assert f"\n## [{version}]" in text  # the version pyproject names has its section


def test_ci_runs_the_script_within_the_constraints_and_a_job_shows_drift() -> None:
    workflow = (REPO / ".github" / "workflows" / "ci.yml").read_text()
    jobs = workflow.split("\njobs:\n", 1)[1]
    assert jobs.count("- run: bash .ci/run") == 2
    drift = jobs.split("\n  drift:\n", 1)[1]
    assert 'OM_CONSTRAINTS: ""' in drift and "continue-on-error: true" in drift
    script = (REPO / ".ci" / "run").read_text()
    assert 'constraints="${OM_CONSTRAINTS-constraints.txt}"' in script
    assert 'export PIP_CONSTRAINT="$PWD/$constraints"' in script
    readme = (REPO / "README.md").read_text()
    command = 'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && python -m pytest'
    assert command in readme and f"\n{command}\n" in script  # the README's test command, run verbatim


def test_ci_runs_the_ratio_scripts_and_keeps_their_output() -> None:
    """The benchmark job (issue 35): each ratio script it names exists, and its output is an artifact."""
    workflow = (REPO / ".github" / "workflows" / "ci.yml").read_text()
    job = workflow.split("\n  benchmarks:\n", 1)[1]
    scripts = re.findall(r"benchmarks/(\w+\.py)", job)
    ratios = {"floor.py", "startup.py", "cli_spawn.py", "ingest.py", "surface_tokens.py", "turn_latency.py"}
    assert ratios <= set(scripts), sorted(ratios - set(scripts))
    assert all((REPO / "benchmarks" / name).exists() for name in scripts), scripts
    assert "actions/upload-artifact" in job and "ratios.txt" in job


def test_the_constraints_pin_every_requirement_within_its_range() -> None:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    project = PYPROJECT["project"]
    for spec in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        requirement = Requirement(spec)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"constraints.txt pins no version of {name}: bash .ci/constraints"
        assert requirement.specifier.contains(pins[name], prereleases=True), (spec, pins[name])


def test_the_architecture_page_names_modules_that_exist() -> None:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"`([a-z_]+(?:/[a-z_<>]+)*(?:\.py|/))(?::[^`]*)?`", text))
    roots = [REPO / "om_mcp", REPO / "om_mcp" / "engine" / "observation", REPO]
    missing = [path for path in sorted(named) if "<" not in path and not any((root / path).exists() for root in roots)]
    assert len(named) > 40 and not missing, missing
