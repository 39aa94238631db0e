"""The annotations of the documentation's command blocks (tests/fixtures/docs_blocks.py): every
skip says why, every annotation is one the docs test understands, and commands are split as a
shell would read them."""

from __future__ import annotations

import pytest

from tests.fixtures.docs_blocks import (
    AnnotationError,
    Block,
    all_blocks,
    commands,
    directive,
    parse,
)

PAGE = """intro
<!-- docs-test: skip: starts a second stack -->
```bash
./dev demo
```
text
```bash
skyctl create job a --run 'true' \\
    --cpus 1   # trailing comment
# a comment line

skyctl get jobs; skyctl get clusters
```
<!-- docs-test: needs slurm k8s -->
```sh
skyshift sim slurm up
```
<!-- docs-test: file train.yaml -->
```yaml
kind: Pipeline
```
```
output, not commands
```
"""


def test_every_annotation_in_the_docs_is_usable_and_every_skip_has_a_reason() -> None:
    found = all_blocks()
    assert any(b.is_shell for b in found)
    for block in found:
        what = directive(block)  # raises for a skip without a reason or an unknown verb
        if what.verb == "skip":
            assert what.reason.strip(), block.where


def test_parse_reads_tags_annotations_and_commands() -> None:
    blocks = parse(PAGE, "p.md")
    assert [(b.line, b.tag, b.is_shell) for b in blocks] == [
        (3, "bash", True),
        (7, "bash", True),
        (15, "sh", True),
        (19, "yaml", False),
        (22, "", False),
    ]
    assert directive(blocks[0]).reason == "starts a second stack"
    assert directive(blocks[1]).verb == "run"
    assert directive(blocks[2]).needs == ("slurm", "k8s")
    assert directive(blocks[3]).filename == "train.yaml"
    assert commands(blocks[1]) == [
        "skyctl create job a --run 'true'      --cpus 1   # trailing comment",
        "skyctl get jobs; skyctl get clusters",
    ]


@pytest.mark.parametrize(
    ("note", "says"),
    [
        ("skip", "needs a reason"),
        ("skip:", "needs a reason"),
        ("skip:   ", "needs a reason"),
        ("needs", "takes some of"),
        ("needs gpu", "takes some of"),
        ("file ../x", "plain file name"),
        ("run it", "unknown annotation"),
    ],
)
def test_unusable_annotations_are_refused_naming_the_block(note: str, says: str) -> None:
    block = Block(page="docs/x.md", line=7, tag="bash", text="true\n", note=note)
    with pytest.raises(AnnotationError, match=says) as err:
        directive(block)
    assert "docs/x.md:7" in str(err.value)
