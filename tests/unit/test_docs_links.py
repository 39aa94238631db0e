"""README.md and docs/*.md point only at files the repository has (issue 27).

Users get the repository, nothing beside it: a pointer to ``../shared/...`` (the development
notes next to the checkout) or to a file that was renamed or never written is a dead end. So
every markdown link to a relative path, and every backticked path that names a repository file
(``docs/x.md``, ``skyshift/a/b.py``, ``tests/...py``, ``bench/...py``, ``scripts/...sh``), must
exist. Links are resolved from the document's own directory (as GitHub renders them), backticked
paths from the repository root (as the docs write them).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE = re.compile(r"`([^`\n]+)`")
REPO_PATH = re.compile(
    r"^(?:\./)?(?:docs|skyshift|tests|bench|scripts|dev)/[\w./-]*\.(?:md|py|sh|toml|json|yaml|png)$"
)
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|#|//)", re.IGNORECASE)


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


def links(text: str) -> list[str]:
    """Relative link targets of a markdown text, without their #anchor or ?query."""
    out = []
    for m in LINK.finditer(text):
        target = m.group(1)
        if EXTERNAL.match(target):
            continue
        target = re.split(r"[#?]", target, maxsplit=1)[0]
        if target:
            out.append(target)
    return out


def code_paths(text: str) -> list[str]:
    """Backticked spans that name a repository file (``docs/x.md``, ``skyshift/a.py``)."""
    out = []
    for m in CODE.finditer(text):
        span = m.group(1).strip()
        span = span.split("::", 1)[0]  # tests/unit/test_x.py::test_y
        span = re.sub(r":\d+(?:-\d+)?$", "", span)  # skyshift/a.py:12
        if REPO_PATH.match(span):
            out.append(span)
    return out


def test_links_and_code_paths_are_found():
    text = (
        "see [a](docs/a.md#x), ![img](console/x.png \"t\"), [web](https://x.org/y), [top](#z),"
        " `docs/b.md`, `skyshift/c.py::f`, `tests/unit/d.py:12`, `scripts/e.sh`, `~/.skyshift`,"
        " `skyctl get jobs`, `job/<ns>/<name>`"
    )
    assert links(text) == ["docs/a.md", "console/x.png"]
    assert code_paths(text) == ["docs/b.md", "skyshift/c.py", "tests/unit/d.py", "scripts/e.sh"]


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_no_pointer_outside_the_repository(doc: Path):
    bad = [n for n, line in enumerate(doc.read_text().splitlines(), 1) if "../shared" in line]
    assert not bad, f"{doc.relative_to(ROOT)} mentions ../shared on lines {bad}"


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_relative_links_exist(doc: Path):
    text = doc.read_text()
    missing = [t for t in links(text) if not (doc.parent / t).exists()]
    assert not missing, f"{doc.relative_to(ROOT)} links to missing files: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_backticked_repository_paths_exist(doc: Path):
    text = doc.read_text()
    missing = sorted({p for p in code_paths(text) if not (ROOT / p).exists()})
    assert not missing, f"{doc.relative_to(ROOT)} names missing files: {missing}"
