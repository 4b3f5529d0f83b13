"""What the MCP registry and PyPI will be given: `server.json` valid against the registry's published
schema (vendored in .ci/schemas with its source), naming the version the package builds."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema

import om_mcp

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / ".ci" / "schemas"


def test_server_json_is_valid_against_the_registrys_schema() -> None:
    described = json.loads((REPO / "server.json").read_text())
    version = re.search(r"/schemas/(\d{4}-\d{2}-\d{2})/server\.schema\.json$", described["$schema"])
    assert version, described["$schema"]
    schema_file = SCHEMAS / f"server.schema.{version.group(1)}.json"
    schema = json.loads(schema_file.read_text())
    assert schema["$id"] == described["$schema"]  # the very schema server.json names
    assert version.group(1) in (SCHEMAS / "README.md").read_text()  # and where it came from
    checker = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    problems = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in checker.iter_errors(described)]
    assert problems == []


def test_server_json_names_the_version_and_package_the_release_builds() -> None:
    described = json.loads((REPO / "server.json").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    [package] = described["packages"]
    assert described["version"] == package["version"] == project["version"] == om_mcp.__version__
    assert package["registryType"] == "pypi" and package["identifier"] == project["name"]
    assert package["runtimeHint"] == "uvx" and package["transport"] == {"type": "stdio"}


def test_the_release_workflow_publishes_what_ci_checks() -> None:
    workflow = (REPO / ".github" / "workflows" / "release.yml").read_text()
    for step in ("python -m build", "twine check", "pypa/gh-action-pypi-publish", "id-token: write", "mcp-publisher"):
        assert step in workflow, step
    assert "password:" not in workflow and "PYPI_TOKEN" not in workflow  # trusted publishing: no stored token
