"""`castd pair --pin -` and `castd pair -` (issue 30): the PIN or the pairing URL on standard input,
so that it is on no command line; one line, trimmed; empty input is a clear error."""
import asyncio
import json

from castkit.castd_proc import Receiver, castd_binary, castd_env


async def pair_from_stdin(env: dict, line: bytes, *args: str) -> tuple[int, str, str]:
    p = await asyncio.create_subprocess_exec(castd_binary(), "pair", *args, "--json", env=env, stdin=asyncio.subprocess.PIPE,
                                             stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(p.communicate(line), 60)
    return p.returncode, out.decode(), err.decode()


async def test_a_pin_and_a_pairing_url_on_standard_input(stack, tmp_path):
    env = castd_env(stack, tmp_path)
    for args, secret in ((("--pin", "-"), lambda s: s["pin"][:3] + " " + s["pin"][3:]), (("-",), lambda s: s["qrUrl"])):
        rx = Receiver(stack)
        try:
            s = await rx.create()
            given = secret(s)
            task = asyncio.create_task(pair_from_stdin(env, f"  {given}\r\n".encode(), *args))
            await rx.wait_pairing_then(True)
            rc, out, err = await task
            assert rc == 0, out + err
            events = [json.loads(l) for l in out.splitlines()]
            assert [e["event"] for e in events] == ["paired", "approved"]
            assert events[0]["sessionId"] == s["sessionId"]
            assert given not in out + err and s["pin"] not in out + err
        finally:
            await rx.client.close()


async def test_empty_standard_input_is_a_clear_error(stack, tmp_path):
    env = castd_env(stack, tmp_path)
    rc, out, err = await pair_from_stdin(env, b"", "--pin", "-")
    assert rc == 1
    assert json.loads(out.splitlines()[-1])["message"] == \
        "No PIN on standard input: pipe in the 6-digit PIN the receiver shows, one line."
    rc, out, err = await pair_from_stdin(env, b"\n", "-")
    assert rc == 1 and "No pairing URL on standard input" in out
