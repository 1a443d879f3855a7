"""docs/architecture.md's module graph is what Scripts/module-graph generates from
Package.swift and the import lines under Sources/ (issue 33: figures in docs generated
or checked). Regenerates the block and compares it with the committed one."""
import importlib.machinery
import importlib.util
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "Scripts" / "module-graph"
DOC = ROOT / "docs" / "architecture.md"


def _module_graph():
    loader = importlib.machinery.SourceFileLoader("module_graph", str(SCRIPT))
    spec = importlib.util.spec_from_loader("module_graph", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _committed_block(text: str, mg) -> str:
    start, end = text.index(mg.BEGIN), text.index(mg.END) + len(mg.END)
    return text[start:end] + "\n"


def test_the_module_graph_in_architecture_md_is_current():
    # The marked block only: the frozen "before this redesign" graph after it is not generated.
    mg = _module_graph()
    generated = mg.render(mg.analyse(mg.dump_package()))
    assert _committed_block(DOC.read_text(), mg) == generated, (
        "docs/architecture.md's module graph is stale: run Scripts/module-graph and commit the doc")


def test_check_mode_fails_on_a_stale_block_and_write_mends_it(tmp_path):
    # A copy of the doc with one declared edge removed: --check fails and names the command;
    # writing regenerates the edge, after which --check passes.
    # Only the generated block is touched: the frozen "before this redesign" graph below it
    # holds the same edge, which no run of the script may change.
    mg = _module_graph()
    text = DOC.read_text()
    block = _committed_block(text, mg)
    assert "  castd --> CastDaemon\n" in block, "the edge this test removes is where it expects"
    doc = tmp_path / "architecture.md"
    doc.write_text(text.replace(block, block.replace("  castd --> CastDaemon\n", ""), 1))
    stale = subprocess.run([str(SCRIPT), "--check", "--doc", str(doc)], capture_output=True,
                           text=True, timeout=300)
    assert stale.returncode == 1 and "run Scripts/module-graph" in stale.stderr
    subprocess.run([str(SCRIPT), "--doc", str(doc)], check=True, timeout=300)
    assert doc.read_text() == text
    assert subprocess.run([str(SCRIPT), "--check", "--doc", str(doc)],
                          timeout=300).returncode == 0


def test_the_import_scanner_reads_every_spelling_of_import(tmp_path):
    (tmp_path / "A.swift").write_text(
        "import CastCore\n"
        "@testable import CastRTP\n"
        "@_implementationOnly import COpenSSL\n"
        "import struct CastMedia.Frame\n"
        "#if canImport(CastSystemd)\n    import CastSystemd\n#endif\n"
        "import Foundation\n"
        "// import CastWebRTC is only a comment\n"
        "let s = \"import CastEncode\"\n")
    candidates = {"CastCore", "CastRTP", "COpenSSL", "CastMedia", "CastSystemd", "CastWebRTC",
                  "CastEncode"}
    assert _module_graph().imports_of(tmp_path, candidates) == [
        "COpenSSL", "CastCore", "CastMedia", "CastRTP", "CastSystemd"]


def test_the_analysis_reports_both_kinds_of_difference(tmp_path):
    # A two-target package in JSON form: B declares C but imports A, which it reaches
    # through C; the analysis names both differences.
    mg = _module_graph()
    for name, body in {"A": "", "B": "import A\n", "C": "import A\n"}.items():
        (tmp_path / "Sources" / name).mkdir(parents=True)
        (tmp_path / "Sources" / name / f"{name}.swift").write_text(body)
    package = {"targets": [
        {"name": "A", "type": "regular", "dependencies": []},
        {"name": "C", "type": "regular", "dependencies": [{"byName": ["A", None]}]},
        {"name": "B", "type": "executable", "dependencies": [{"byName": ["C", None]}]},
    ]}
    result = mg.analyse(package, root=tmp_path)
    kinds = {(t, kind, m) for t, kind, m, _ in result["mismatches"]}
    assert kinds == {("B", "declared, not imported", "C"), ("B", "imported, not declared", "A")}
    assert result["edges"] == [("B", "C"), ("C", "A")]
