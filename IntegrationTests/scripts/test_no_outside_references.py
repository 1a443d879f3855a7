"""The repository stands on its own (issue 33): no tracked file refers to documents that
live outside it: the sibling `shared` directory, its design and style notes, or the
contract's source files. The contract is stated in docs/contract.md, the design and the
rules of the code in docs/architecture.md. docs/lab-notes/ is exempt: dated logs record
what was true when they were written."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Built from pieces so that this file does not match itself.
_OUTSIDE = [
    r"\.\./" + "shared",
    r"/work/" + "shared",
    r"\b" + "DESIGN" + r"(\.md)?\b",
    r"\b" + "STYLE" + r"(\.md)?\b",
    "supabase" + r"-wire(\.md)?",
    "contract" + r"-addendum(\.md)?",
    "ipadcast" + r"-native-spec",
    r"related-(screencast|termpod)" + r"-\w+\.txt",
]
PATTERN = re.compile("|".join(_OUTSIDE))

# Files allowed to refer out, with the number of lines that may (none today; an entry here
# must say why).
ALLOWED: dict[str, int] = {}


def outside_references() -> dict[str, list[str]]:
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                           check=True, timeout=60).stdout.decode().split("\0")
    found: dict[str, list[str]] = {}
    for name in filter(None, files):
        if name.startswith("docs/lab-notes/") or name == "IntegrationTests/scripts/test_no_outside_references.py":
            continue
        path = ROOT / name
        if not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        hits = [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if PATTERN.search(line)]
        if hits:
            found[name] = hits
    return found


def test_no_tracked_file_refers_outside_the_repository():
    found = outside_references()
    unexpected = {f: lines for f, lines in found.items() if len(lines) > ALLOWED.get(f, 0)}
    assert not unexpected, (
        "these files refer to documents outside the repository; point them at docs/contract.md "
        "(the contract) or docs/architecture.md (design, rules of the code) instead:\n"
        + "\n".join(f"{f}:{line}" for f, lines in unexpected.items() for line in lines))


def test_the_allow_list_holds_only_references_that_still_exist():
    found = outside_references()
    stale = {f: n for f, n in ALLOWED.items() if len(found.get(f, [])) < n}
    assert not stale, f"these allow-list entries are no longer needed; remove them: {stale}"


def test_the_pattern_sees_every_spelling_and_spares_ordinary_text():
    for line in ["see ../" + "shared/DESIGN.md", "(" + "STYLE.md rule 5)", "(DESIGN: drop, never queue)",
                 "supabase" + "-wire.md §C", "contract" + "-addendum \"Signaling rows\"",
                 "/work/" + "shared/spec/x", "ipadcast" + "-native-spec.txt"]:
        assert PATTERN.search(line), line
    for line in ["docs/contract.md, wire C", "rule 5, docs/architecture.md", "a shared machine",
                 "design notes", "spec §11", "the contract's addendum"]:
        assert not PATTERN.search(line), line
