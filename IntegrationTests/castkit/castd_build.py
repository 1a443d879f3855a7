"""Where the castd binaries under test are. Integration tests use the release
build (Scripts/test builds it): the debug build is too slow to capture and
encode a large screen in real time. CASTD_BUILD=debug selects the debug build."""
import functools
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


@functools.cache
def bin_dir() -> pathlib.Path:
    if os.environ.get("CASTD_BIN_DIR"):       # binaries built elsewhere (e.g. copied from another tree)
        return pathlib.Path(os.environ["CASTD_BIN_DIR"])
    conf = os.environ.get("CASTD_BUILD", "release")
    out = subprocess.run(["swift", "build", "-c", conf, "--show-bin-path"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return pathlib.Path(out.stdout.strip())


def binary(name: str = "castd") -> str:
    path = bin_dir() / name
    assert path.exists(), f"{path} is not built (Scripts/test builds it: swift build -c release)"
    return str(path)
