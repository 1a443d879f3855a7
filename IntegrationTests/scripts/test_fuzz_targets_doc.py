"""docs/fuzzing.md's target list is the truth of Fuzz/Sources and `Scripts/fuzz --list`
(the docs once said 15, 16 and 17 targets while there were 20). The table under
"## Targets" names each target once, and the sentence above it gives their number."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "fuzzing.md"


def documented_targets(text: str) -> tuple[list[str], int | None]:
    """The first cell of each row of the table in the "## Targets" section, and the
    number the section's sentence "castd has N libFuzzer targets" states."""
    section = re.search(r"^## Targets\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section, "docs/fuzzing.md has no '## Targets' section"
    body = section.group(1)
    names = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or cells[0] in ("target", "") or set(cells[0]) <= set("-:"):
            continue
        names.append(cells[0].strip("`"))
    stated = re.search(r"castd has (\d+) libFuzzer targets", body)
    return names, int(stated.group(1)) if stated else None


def source_targets() -> list[str]:
    return sorted(p.name.removeprefix("Fuzz") for p in (ROOT / "Fuzz" / "Sources").iterdir()
                  if p.is_dir() and p.name.startswith("Fuzz"))


def test_the_fuzzing_doc_lists_exactly_the_targets_in_fuzz_sources():
    names, stated = documented_targets(DOC.read_text())
    assert len(names) == len(set(names)), f"a target is listed twice: {names}"
    sources = source_targets()
    assert sorted(names) == sources, (
        f"docs/fuzzing.md lists {sorted(set(names) - set(sources))} that Fuzz/Sources lacks and "
        f"misses {sorted(set(sources) - set(names))}: update its '## Targets' table")
    assert stated == len(sources), f"docs/fuzzing.md says {stated} targets; Fuzz/Sources has {len(sources)}"


def test_scripts_fuzz_list_agrees_with_the_doc():
    listed = subprocess.run([str(ROOT / "Scripts" / "fuzz"), "--list"], capture_output=True,
                            text=True, check=True, timeout=30).stdout.split()
    names, _ = documented_targets(DOC.read_text())
    assert sorted(listed) == sorted(names)


def test_the_check_sees_a_missing_row_and_a_wrong_count():
    # The parser on a doc with one row removed and a stale number: both must show.
    text = DOC.read_text()
    rows = [l for l in text.splitlines() if l.startswith("| STUN |")]
    assert rows, "the STUN row is where this test expects it"
    names, stated = documented_targets(text.replace(rows[0] + "\n", "").replace(
        f"castd has {len(source_targets())} libFuzzer", "castd has 17 libFuzzer"))
    assert "STUN" not in names and sorted(names) != source_targets()
    assert stated == 17
