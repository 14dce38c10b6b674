"""The README is short and points to the harness reference; the reference documents the harness.

README.md is for users: every make target, and links to workflows/README.md and docs/*.md.
workflows/README.md is for maintainers: every workflow target, config and profile. Every
relative link in these pages points to a file that exists.
"""

import re
from pathlib import Path

import pytest
from workflow_runner import CONFIGS, REPO_ROOT

README = REPO_ROOT / "README.md"
HARNESS_README = REPO_ROOT / "workflows" / "README.md"
DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))
README_MAX_LINES = 200

WORKFLOW_TARGETS = ("spmm", "sddmm", "attention", "conv", "rgcn", "sage", "gpu_bundle", "gpu_ingest")
PROFILES = ("profiles/slurm", "profiles/kubernetes")
# [text](target) or [text](target "title"); images too.
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose(page: Path) -> str:
    """``page`` without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", page.read_text(), flags=re.DOTALL | re.MULTILINE)


def links(page: Path) -> list[str]:
    """The link targets in ``page``, outside fenced code blocks."""
    return LINK.findall(prose(page))


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page``."""
    headings = re.findall(r"^#{1,6}\s+(.*?)\s*$", prose(page), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def is_relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) and not target.startswith("#")


def test_readme_is_at_most_200_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference material to docs/"


def test_every_make_target_is_documented_in_the_readme():
    makefile = (REPO_ROOT / "Makefile").read_text()
    targets = re.search(r"^\.PHONY: (.*)$", makefile, re.MULTILINE).group(1).split()
    readme = README.read_text()
    for target in targets:
        assert f"make {target}" in readme, target


def test_readme_links_the_harness_reference_and_every_doc():
    linked = {(README.parent / target.split("#")[0]).resolve() for target in links(README) if is_relative(target)}
    assert DOCS, "docs/*.md is missing"
    for page in (HARNESS_README, *DOCS):
        assert page.resolve() in linked, f"README.md does not link {page.relative_to(REPO_ROOT)}"


def test_harness_reference_documents_every_workflow_target_config_and_profile():
    reference = HARNESS_README.read_text()
    for target in WORKFLOW_TARGETS:
        assert f"`{target}`" in reference, target
    configs = [config.name for config in CONFIGS.glob("*.yaml") if config.name != "schema.yaml"]
    assert configs
    for name in configs:
        assert name in reference, name
    for profile in PROFILES:
        assert profile in reference, profile


PAGES = [README, HARNESS_README, *DOCS]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO_ROOT)))
def test_every_relative_link_points_to_a_file_that_exists(page):
    broken = [target for target in links(page)
              if is_relative(target) and not (page.parent / target.split("#")[0]).exists()]
    assert not broken, f"{page.relative_to(REPO_ROOT)} links to missing files: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO_ROOT)))
def test_every_section_link_points_to_a_heading(page):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path) if path else page
        checkable = anchor and (path == "" or is_relative(target)) and linked.suffix == ".md" and linked.exists()
        if checkable and anchor not in anchors(linked):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO_ROOT)} links to missing headings: {broken}"
