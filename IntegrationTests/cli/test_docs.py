"""The documentation castd generates from its command spec (issue 30): `castd generate-docs`
writes man pages that groff renders without a warning and `man -l` shows with every option of
`--help`, and shell completions that bash, zsh and fish load and that complete the spec's values."""
import os
import re
import shutil
import subprocess

import pytest

from castkit.castd_proc import castd_binary

PAGES = ["castd.1", "castd-pair.1", "castd-doctor.1", "castd-config.1", "castd-status.1", "castd-stop.1", "castd.conf.5"]


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    out = tmp_path_factory.mktemp("h-cli-docs")
    r = subprocess.run([castd_binary(), "generate-docs", "--man", str(out / "man"), "--completions", str(out / "completions")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return out


def test_generate_docs_writes_exactly_the_agreed_files(docs):
    assert sorted(os.listdir(docs / "man")) == sorted(PAGES)
    assert sorted(os.listdir(docs / "completions")) == ["_castd", "castd.bash", "castd.fish"]


@pytest.mark.parametrize("page", PAGES)
def test_man_pages_render_without_groff_warnings(docs, page):
    r = subprocess.run(["groff", "-man", "-ww", "-z", str(docs / "man" / page)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def man_text(path) -> str:
    r = subprocess.run(["man", "-l", str(path)], capture_output=True, text=True, env={**os.environ, "MANWIDTH": "200",
                       "MAN_KEEP_FORMATTING": "", "PAGER": "cat"})
    assert r.returncode == 0, r.stderr
    return re.sub(r".\x08", "", r.stdout)


@pytest.mark.parametrize("command", ["pair", "doctor", "config", "status", "stop", None])
def test_each_man_page_lists_every_option_of_its_help(docs, command):
    """The man page and `castd <command> --help` come from one spec: same options."""
    args = [command, "--help"] if command else ["help", "session"]
    h = subprocess.run([castd_binary(), *args], capture_output=True, text=True)
    assert h.returncode == 0, h.stderr
    options = set(re.findall(r"^  (--[a-z][a-z0-9-]*)", h.stdout, re.M))
    assert len(options) >= 1
    page = man_text(docs / "man" / (f"castd-{command}.1" if command else "castd.1"))
    for o in options:
        assert re.search(rf"^\s+{re.escape(o)}\b", page, re.M), f"{o} of `castd {args}` missing from its man page"
    assert "EXIT STATUS" in page


def test_castd_1_lists_the_subcommands_and_the_conf_page_every_key(docs):
    page = man_text(docs / "man" / "castd.1")
    for c in ["pair", "doctor", "config", "status", "stop"]:
        assert f"castd {c}" in page and f"castd-{c}(1)" in page
    conf = man_text(docs / "man" / "castd.conf.5")
    keys = ["api-url", "supabase-url", "supabase-key", "capture", "output", "display", "source", "window", "encoder",
            "audio", "cursor", "notify", "max-fps", "max-bitrate-kbps", "max-height"]
    for k in keys:
        assert re.search(rf"^\s+{re.escape(k)} = ", conf, re.M), k
        assert "CASTD_" + k.upper().replace("-", "_") in conf


def bash_complete(docs, *words) -> list[str]:
    """COMP_WORDS/COMP_CWORD as bash sets them for `castd <words…>` with the cursor on the last word."""
    script = (f"source {docs / 'completions' / 'castd.bash'}; complete -p castd >/dev/null || exit 9; "
              f"COMP_WORDS=(castd {' '.join(repr(w) if w else repr('') for w in words)}); COMP_CWORD={len(words)}; "
              "_castd; printf '%s\\n' \"${COMPREPLY[@]}\"")
    r = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.splitlines() if w]


def test_bash_completion_completes_commands_options_and_values(docs):
    r = subprocess.run(["bash", "--norc", "-c", f"source {docs / 'completions' / 'castd.bash'}; complete -p castd"],
                       capture_output=True, text=True)
    assert r.stdout.strip() == "complete -F _castd castd"
    assert bash_complete(docs, "") == ["pair", "doctor", "config", "status", "stop", "help", "--session", "--help", "--version"]
    assert bash_complete(docs, "st") == ["status", "stop"]
    assert bash_complete(docs, "--session", "x", "--capture", "") == ["auto", "x11", "portal", "mutter"]
    assert bash_complete(docs, "--session", "x", "--no-") == ["--no-cursor", "--no-dmabuf", "--no-notify"]
    assert bash_complete(docs, "pair", "--d") == ["--device-name", "--dev-trust-certificate"]
    assert bash_complete(docs, "pair", "--pin", "") == []          # a PIN is not guessed
    assert bash_complete(docs, "help", "s") == ["session", "status", "stop"]
    assert "--turn-url" in bash_complete(docs, "doctor", "--turn")
    assert "--capture" not in bash_complete(docs, "pair", "--")   # the daemon's options are not pair's


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed (Scripts/bootstrap installs it)")
def test_zsh_completion_parses_and_defines_the_function(docs):
    path = docs / "completions" / "_castd"
    assert subprocess.run(["zsh", "-n", str(path)], capture_output=True, text=True).returncode == 0
    assert path.read_text().startswith("#compdef castd\n")
    # Loaded through compinit from a directory on fpath, `castd` gets the _castd function.
    script = (f"fpath=({path.parent} $fpath); autoload -Uz compinit; compinit -u -d {docs}/zcompdump; "
              "print -r -- ${_comps[castd]}")
    r = subprocess.run(["zsh", "-f", "-c", script], capture_output=True, text=True, env={**os.environ, "HOME": str(docs)})
    assert r.stdout.strip() == "_castd", r.stdout + r.stderr


@pytest.mark.skipif(not shutil.which("fish"), reason="fish is not installed (Scripts/bootstrap installs it)")
def test_fish_completion_parses_and_completes(docs):
    path = docs / "completions" / "castd.fish"
    r = subprocess.run(["fish", "-n", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

    def complete(line):
        r = subprocess.run(["fish", "--no-config", "-c", f"source {path}; complete -C '{line}'"], capture_output=True, text=True,
                           env={**os.environ, "HOME": str(docs)})
        assert r.returncode == 0, r.stderr
        return [l.split("\t")[0] for l in r.stdout.splitlines()]

    assert {"pair", "doctor", "config", "status", "stop"} <= set(complete("castd "))
    assert complete("castd --session x --encoder ") == ["auto", "vaapi", "x264"]
    assert "--device-name" in complete("castd pair --")
    assert "--capture" not in complete("castd pair --")
