"""The Debian package (Scripts/package) built from the release build CI already has: what it
holds, its fields, that its binary runs without the Swift toolchain, that its man pages
render, and that lintian finds no error. The install into a fresh Debian 12 root, a cast from
there and the purge are the full fault set's row (IntegrationTests/castkit/faults/package.py)."""
from __future__ import annotations

import configparser
import gzip
import os
import re
import stat
import subprocess
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from castkit.castd_build import binary
from castkit.paths import REPO, SCRIPTS

VERSION = re.search(r'static let string = "([^"]+)"', (REPO / "Sources/CastCore/Version.swift").read_text()).group(1)

MAN1 = ["castd", "castd-pair", "castd-doctor", "castd-config", "castd-status", "castd-stop"]
EXPECTED_FILES = {
    "usr/bin/castd", "usr/bin/castd-launcher",
    "usr/lib/systemd/user/castd@.service",
    "usr/share/applications/castd.desktop",
    "usr/share/icons/hicolor/scalable/apps/castd.svg",
    *(f"usr/share/man/man1/{p}.1.gz" for p in MAN1), "usr/share/man/man5/castd.conf.5.gz",
    "usr/share/man/man1/castd-launcher.1.gz",   # hand-written (packaging/): the launcher is a script
    "usr/share/bash-completion/completions/castd",
    "usr/share/zsh/vendor-completions/_castd",
    "usr/share/fish/vendor_completions.d/castd.fish",
    "usr/share/doc/castd/copyright", "usr/share/doc/castd/changelog.Debian.gz",
}


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([str(SCRIPTS / "package"), "--bin", binary("castd"), "--out", str(out), "--no-lintian"],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    debs = list(out.glob("castd_*.deb"))
    assert len(debs) == 1, debs
    return debs[0]


@pytest.fixture(scope="module")
def tree(deb, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tree")
    subprocess.run(["dpkg-deb", "-R", str(deb), str(d)], check=True)
    return d


def field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True, check=True).stdout.strip()


def test_name_version_and_control_fields(deb):
    assert deb.name == f"castd_{VERSION}-1_amd64.deb"
    info = subprocess.run(["dpkg-deb", "-I", str(deb)], capture_output=True, text=True, check=True).stdout
    for f in ("Package: castd", f"Version: {VERSION}-1", "Architecture: amd64", "Section: video",
              "Priority: optional", "Maintainer: ", "Installed-Size: ", "Description: "):
        assert f in info, f
    depends = [d.strip() for d in field(deb, "Depends").split(",")]
    names = {re.split(r"[ (]", d)[0] for d in depends}
    # Runtime libraries only, as the binary links them: none of the -dev packages it was built with,
    # nothing of Swift (its runtime is inside the binary).
    assert not [d for d in depends if "-dev" in d or "swift" in d.lower()], depends
    assert {"libc6", "libx264-164", "libssl3", "libpipewire-0.3-0", "libvpx7", "libopus0", "libsystemd0"} <= names, names
    assert "pipewire" in field(deb, "Recommends") and "xdg-desktop-portal" in field(deb, "Recommends")
    assert "zenity" in field(deb, "Suggests")
    size = int(field(deb, "Installed-Size"))
    assert 1000 < size < 100_000, size          # KiB: a stripped castd of a few MiB, not 35 MiB of symbols


def test_contents_owners_and_modes(deb):
    with tarfile.open(fileobj=__import__("io").BytesIO(subprocess.run(
            ["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True).stdout)) as t:
        members = t.getmembers()
    files = {m.name.removeprefix("./") for m in members if m.isfile()}
    assert files == EXPECTED_FILES, (files ^ EXPECTED_FILES)
    for m in members:
        assert (m.uname, m.gname, m.uid, m.gid) == ("root", "root", 0, 0), m.name
        name = m.name.removeprefix("./")
        want = 0o755 if m.isdir() or name.startswith("usr/bin/") else 0o644
        assert stat.S_IMODE(m.mode) == want, (name, oct(m.mode))


def test_md5sums_match_the_files(tree):
    r = subprocess.run(["md5sum", "--check", "--quiet", str(tree / "DEBIAN" / "md5sums")], cwd=tree,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    listed = {l.split(None, 1)[1] for l in (tree / "DEBIAN" / "md5sums").read_text().splitlines()}
    assert listed == EXPECTED_FILES


def test_the_packaged_binary_is_stripped_runs_and_needs_no_swift_library(tree):
    castd = tree / "usr/bin/castd"
    assert subprocess.run([str(castd), "--version"], capture_output=True, text=True, check=True).stdout.strip() \
        == f"castd {VERSION}"
    sections = subprocess.run(["readelf", "-S", "-W", str(castd)], capture_output=True, text=True, check=True).stdout
    assert ".symtab" not in sections and ".debug_info" not in sections
    ldd = subprocess.run(["ldd", str(castd)], capture_output=True, text=True, check=True).stdout
    assert "libswift" not in ldd and "libFoundation" not in ldd and "libdispatch" not in ldd and "not found" not in ldd


def test_man_pages_render_without_warnings(tree):
    pages = sorted((tree / "usr/share/man").glob("man*/*.gz"))
    assert len(pages) == 8   # seven generated, the launcher's hand-written
    for page in pages:
        roff = gzip.decompress(page.read_bytes()).decode()
        r = subprocess.run(["man", "--warnings", "-l", str(page)], capture_output=True, text=True,
                           env={**{k: v for k, v in os.environ.items() if k != "MAN_KEEP_FORMATTING"},
                                "MANWIDTH": "80", "LC_ALL": "C.UTF-8"})
        assert r.returncode == 0 and r.stderr == "", (page.name, r.stderr)
        assert "NAME" in r.stdout and "castd" in r.stdout and len(r.stdout.splitlines()) > 5, page.name
        assert roff.startswith((".TH", ".\\\"", "'\\\"")), page.name
    # gzip -9n: no name or time stamp in the header (reproducible)
    assert all(p.read_bytes()[4:8] == b"\0\0\0\0" for p in pages)


def test_completions_load(tree):
    bash = tree / "usr/share/bash-completion/completions/castd"
    r = subprocess.run(["bash", "-c", f'source "{bash}" && complete -p castd'], capture_output=True, text=True)
    assert r.returncode == 0 and "castd" in r.stdout, r.stderr
    assert (tree / "usr/share/zsh/vendor-completions/_castd").read_text().startswith("#compdef castd")
    assert "complete -c castd" in (tree / "usr/share/fish/vendor_completions.d/castd.fish").read_text()


def test_unit_desktop_file_and_icon(tree, tmp_path):
    unit = tree / "usr/lib/systemd/user/castd@.service"
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    cp.read(unit)
    assert cp["Service"]["ExecStart"] == "/usr/bin/castd --session %i"
    assert cp["Unit"]["Documentation"] == "man:castd(1)"
    assert cp["Service"]["EnvironmentFile"] == "-%h/.config/castd/environment"      # optional
    # Verified as Scripts/install would place it (the path rewritten to the packaged castd), with
    # man(1) looking in the package's own man pages: Documentation=man:castd(1) names one of them.
    placed = tmp_path / "castd@.service"
    placed.write_text(unit.read_text().replace("ExecStart=/usr/bin/castd ", f"ExecStart={tree}/usr/bin/castd "))
    r = subprocess.run(["systemd-analyze", "verify", str(placed)], capture_output=True, text=True,
                       env=dict(os.environ, HOME=str(tmp_path), MANPATH=str(tree / "usr/share/man")))
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    desktop = tree / "usr/share/applications/castd.desktop"
    r = subprocess.run(["desktop-file-validate", str(desktop)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    text = desktop.read_text()
    assert "Icon=castd\n" in text and "Exec=castd-launcher" in text
    svg = ET.parse(tree / "usr/share/icons/hicolor/scalable/apps/castd.svg").getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg" and svg.get("viewBox") == "0 0 128 128"


def test_copyright_is_dep5_and_matches_the_license(tree):
    text = (tree / "usr/share/doc/castd/copyright").read_text()
    stanzas = [s for s in text.split("\n\n") if s.strip()]
    assert stanzas[0].startswith("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/")
    files = next(s for s in stanzas if s.startswith("Files: *"))
    assert "Copyright: 2026 The castd developers" in files and "License: Expat" in files
    body = next(s for s in stanzas if s.startswith("License: Expat\n")).split("\n", 1)[1]
    # The DEP-5 body (one space of indent, "." for a blank line) is the LICENSE's text.
    as_text = "\n".join("" if l == " ." else l[1:] for l in body.splitlines())
    license_text = (REPO / "LICENSE").read_text()
    assert "Copyright (c) 2026 The castd developers" in license_text
    assert as_text.strip() in license_text and as_text.startswith("Permission is hereby granted")
    changelog = gzip.decompress((tree / "usr/share/doc/castd/changelog.Debian.gz").read_bytes()).decode()
    assert changelog.startswith(f"castd ({VERSION}-1) unstable; urgency=medium")


@pytest.mark.timeout(120)
def test_lintian_reports_no_errors(deb):
    r = subprocess.run(["lintian", "--no-cfg", "--tag-display-limit", "0", str(deb)], capture_output=True, text=True)
    tags = [l for l in (r.stdout + r.stderr).splitlines() if re.match(r"^[EWIPNX]: ", l)]
    print("\n".join(tags))
    assert not [t for t in tags if t.startswith("E: ")], tags
    # The warnings docs/packaging.md lists and explains; a new one is a change to look at.
    known = {"initial-upload-closes-no-bugs"}
    new = [t for t in tags if t.startswith("W: ") and t.split()[2] not in known]
    assert not new, new


def test_a_binary_of_another_version_is_refused(tmp_path):
    """The version has one place: a castd that says otherwise (a stale build) is not packaged."""
    stale = tmp_path / "castd"
    stale.write_text("#!/bin/sh\necho 'castd 0.0.1-stale'\n")
    stale.chmod(0o755)
    r = subprocess.run([str(SCRIPTS / "package"), "--bin", str(stale), "--out", str(tmp_path / "dist"), "--no-lintian"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert f"Version.swift says {VERSION}: rebuild" in r.stderr, r.stderr
    assert not (tmp_path / "dist").exists()
