"""Scripts/test takes the exit status of every build it runs (issue 17): a failed release
build must stop the integration step, not be hidden behind `| grep` while pytest runs a stale
binary. Scripts/test runs here in a copy of the repository's skeleton with a `swift` on PATH
that fails the build and a `.venv/bin/python` that records whether pytest was started."""
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _skeleton(tmp_path: Path, release_build_fails: bool) -> tuple[Path, Path]:
    root = tmp_path / "repo"
    (root / "Scripts").mkdir(parents=True)
    shutil.copy(ROOT / "Scripts" / "test", root / "Scripts" / "test")
    (root / "Scripts" / "bootstrap").write_text("#!/bin/sh\nexit 0\n")
    (root / "IntegrationTests" / "x").mkdir(parents=True)
    (root / "IntegrationTests" / "x" / "test_x.py").write_text("")
    ran = tmp_path / "pytest-ran"
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").write_text(f"#!/bin/sh\ntouch {ran}\nexit 0\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    status = 1 if release_build_fails else 0
    # Prints what a real build prints (so the grep filter matches), then fails or not.
    (bin_dir / "swift").write_text(
        "#!/bin/sh\necho 'error: compile command failed due to signal 6'\n"
        f"echo 'Build complete!'\nexit {status}\n")
    for f in [root / "Scripts" / "bootstrap", root / ".venv" / "bin" / "python", bin_dir / "swift"]:
        f.chmod(0o755)
    return root, bin_dir


def _run(root: Path, bin_dir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    return subprocess.run([str(root / "Scripts" / "test"), "--only", "integration"], env=env,
                          capture_output=True, text=True, timeout=30)


def test_a_failed_release_build_fails_the_step_and_pytest_does_not_run(tmp_path):
    root, bin_dir = _skeleton(tmp_path, release_build_fails=True)
    r = _run(root, bin_dir)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "release build failed; pytest not run" in r.stdout, r.stdout
    assert not (tmp_path / "pytest-ran").exists()


def test_a_good_release_build_goes_on_to_pytest(tmp_path):
    # The same skeleton with a build that succeeds: proves the check above can pass.
    root, bin_dir = _skeleton(tmp_path, release_build_fails=False)
    r = _run(root, bin_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "pytest-ran").exists()


def test_a_whole_run_builds_the_release_beside_the_unit_tests_and_stops_pytest_when_it_fails(tmp_path):
    # A whole run (no --only) builds the release in a scratch directory of its own while the unit
    # tests run; its failure must still keep pytest from running, and a success must hand pytest
    # the binaries' directory. The fake swift fails only release builds when asked to.
    for fails in (True, False):
        case = tmp_path / ("fails" if fails else "builds")
        case.mkdir()
        root, bin_dir = _skeleton(case, release_build_fails=False)
        ran = case / "pytest-ran"
        (root / ".venv" / "bin" / "python").write_text(
            f'#!/bin/sh\ncase "$*" in *"-m pytest"*) env > {ran} ;; esac\nexit 0\n')
        (bin_dir / "swift").write_text(
            "#!/bin/sh\n"
            'case "$*" in *--show-bin-path*) echo "$PWD/.build/ci-release/release"; exit 0 ;; esac\n'
            f'case "$*" in *"-c release"*) echo "error: release failed"; exit {1 if fails else 0} ;; esac\n'
            "echo 'Build complete!'\nexit 0\n")
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
        env.pop("CASTD_BIN_DIR", None)   # CI's own pytest runs with it set
        r = subprocess.run([str(root / "Scripts" / "test"), "--no-faults", "--fuzz-seconds", "0"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0   # the skeleton has no devstack: that step fails in both cases
        if fails:
            assert "release build failed; pytest not run" in r.stdout, r.stdout + r.stderr
            assert not ran.exists()
        else:
            assert "release build failed" not in r.stdout, r.stdout + r.stderr
            assert f"CASTD_BIN_DIR={root}/.build/ci-release/release" in ran.read_text()
