"""castd casting an Xvfb screen to the real receiver: the stack's /dashboard and /viewer/:id
in headless Chromium (Debian's), with Chrome's mDNS host candidates on (Chrome's default) and off.

With mDNS on, Chromium announces its names by multicast (its mDNS socket joins the group),
and castd takes them from what it heard or queries them, joining the group itself only when
it queries. So each test here runs again in a child pytest inside network namespaces of its
own (castkit/confine.py: the stack, Xvfb, Chromium and castd there, a veth pair as the only
non-loopback interface), and an nftables guard in the machine's namespace shows that none of
it left the machine."""
import pytest

from castkit.castd_proc import chromium_cast
from castkit.confine import confined, rerun_confined
from castkit.mdns_responder import group_users
from castkit.receiver_pages import Viewer
from castkit.xscreen import BARS


async def sample_bars(viewer: Viewer, size: tuple[int, int]) -> list:
    """Each colour bar of the pattern sampled (16×16 at 30 % of the height), beside the colour it should be."""
    samples = []
    for i, want in enumerate(BARS):
        x = int((i + 0.5) * size[0] / 7) - 8
        samples.append((await viewer.sample(x, int(size[1] * 0.3), 16, 16), want))
    return samples


@pytest.mark.timeout(240)
# mdns-on is what Chrome does by default (CI); mdns-off, its host addresses in the clear, is a long row.
@pytest.mark.parametrize("hide_mdns", [True, pytest.param(False, marks=pytest.mark.long)], ids=["mdns-on", "mdns-off"])
async def test_chromium_viewer_decodes_castds_h264_and_shows_the_pattern(request, tmp_path, hide_mdns):
    if not confined():
        counts = rerun_confined(request, tmp_path, timeout=220)
        # The positive control: in there, mDNS went out and the group was joined (IGMP) exactly
        # when Chromium hid its addresses. The join is Chromium's, castd's or both: castd joins
        # only when it queries (the inner run checks that in /proc/net/igmp), and when it did
        # not, it heard Chromium's announcement through Chromium's membership. The kernel
        # reports a group once per interface, so the count cannot tell whose it was.
        inside = counts["inside"]
        assert (inside["igmp"] > 0) == hide_mdns, counts
        assert (inside["mdns_v4"] + inside["mdns_v6"] > 0) == hide_mdns, counts
        # … from the run's own sockets, which the root namespace's rule would have counted.
        assert (inside["run_any"] > 0) == hide_mdns, counts
        return
    stack = request.getfixturevalue("stack")
    size = (1280, 720)
    async with chromium_cast(stack, tmp_path, hide_mdns=hide_mdns, size=size) as (viewer, daemon):
        first = await viewer.wait_frames(10, timeout=40)
        later = await viewer.wait_frames(first["framesDecoded"] + 30, timeout=20)
        samples = await sample_bars(viewer, size)
        members_casting = group_users()
        daemon.signal()
        await viewer.page.wait_for("window.castdViewer.message.includes('disconnected')", timeout=5)
        rc, _ = await daemon.wait(timeout=5)
        members_after = group_users()   # castd gone, Chromium still up
    ice = [l for l in daemon.stderr_lines if "event=mdns_" in l or "event=selected_pair" in l or "event=remote_candidate" in l]
    print("ICE\n" + "\n".join(ice))
    print(f"MEMBERS casting={members_casting} after={members_after}")
    assert "H264" in (later.get("codec") or "")
    assert (later["frameWidth"], later["frameHeight"]) == size
    assert later["framesDecoded"] >= first["framesDecoded"] + 30        # frames keep climbing
    for got, want in samples:
        # Through the browser's decoder, scaler and canvas: within a few percent.
        assert max(abs(got[k] - w) for k, w in zip("rgb", want)) <= 16, (got, want)
    assert rc == 0
    # ICE: Chromium's host candidates come as <uuid>.local names (mdns-on) that castd resolves
    # (by its query or Chromium's repeated announcement on 224.0.0.251), or as addresses (mdns-off); either way the
    # selected pair's remote ends up a host candidate with the receiver's real address.
    remote_candidates = [l for l in ice if "event=remote_candidate" in l and "type=host" in l]
    assert remote_candidates and all(("address=mdns#" in l) == hide_mdns for l in remote_candidates), ice
    assert any("event=mdns_resolved" in l for l in ice) == hide_mdns, ice
    assert [l for l in ice if "event=selected_pair" in l][-1].endswith("remote_type=host"), ice
    # castd's own mDNS group membership (the kernel's users while it cast, minus after it left):
    # one on the veth exactly when it queried, i.e. a name it had not heard announced; none when
    # the name came from its cache or no name came at all (mdns-off).
    queried = any(("event=mdns_resolved" in l and "source=response" in l) or "event=mdns_unresolved" in l for l in ice)
    assert members_casting["v4"] - members_after["v4"] == int(queried), (members_casting, members_after, ice)


@pytest.mark.timeout(240)
async def test_a_viewer_refresh_gets_a_fresh_offer_and_the_cast_resumes(request, tmp_path):
    if not confined():
        counts = rerun_confined(request, tmp_path, timeout=220)
        # Chromium showed real addresses: castd had no name to query, so nobody joined the mDNS
        # group (no IGMP report).
        assert counts["inside"]["igmp"] == 0, counts
        return
    stack = request.getfixturevalue("stack")
    async with chromium_cast(stack, tmp_path) as (viewer, daemon):
        await viewer.wait_frames(10, timeout=40)
        first_nid = await viewer.page.evaluate("window.castdViewer.negotiationId")
        # The receiver refreshes its page: it ignores the old offer and waits for a new one (spec §11).
        viewer = await Viewer.open(viewer.page, stack.api_url, viewer.session_id)
        stats = await viewer.wait_frames(10, timeout=60)
        assert stats["negotiationId"] != first_nid
        assert daemon.log_has("event=negotiate") and daemon.log_has("attempt=1")
        daemon.signal()
        rc, _ = await daemon.wait(timeout=5)
        assert rc == 0



# The H.264 profile-level-ids a Chromium page can receive (RTCRtpReceiver.getCapabilities).
RECEIVE_H264 = ("[...new Set(RTCRtpReceiver.getCapabilities('video').codecs.filter(c => c.mimeType === 'video/H264')"
                ".map(c => (c.sdpFmtpLine.match(/profile-level-id=([0-9a-f]+)/i) || [])[1]))]")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("profile", ["high", "baseline"])
async def test_chromium_gets_the_first_h264_profile_of_castds_offer_it_decodes(request, tmp_path, profile):
    """--h264-profile high offers High (640c1f) before Constrained Baseline: a Chromium that
    receives High takes it (its getStats names 640c1f, castd's encoder says profile=high); one
    that does not (Debian's Chromium 156 lists 42001f, 42e01f, 4d001f and f4001f only) takes
    Constrained Baseline, the offer's second H.264. baseline offers 42e01f alone. Either way
    the picture is right."""
    if not confined():
        rerun_confined(request, tmp_path, timeout=220)
        return
    stack = request.getfixturevalue("stack")
    size = (1280, 720)
    async with chromium_cast(stack, tmp_path, size=size, castd_args=("--h264-profile", profile)) as (viewer, daemon):
        receives = await viewer.page.evaluate(RECEIVE_H264)
        first = await viewer.wait_frames(10, timeout=40)
        later = await viewer.wait_frames(first["framesDecoded"] + 30, timeout=20)
        samples = await sample_bars(viewer, size)
        daemon.signal()
        rc, _ = await daemon.wait(timeout=5)
    takes_high = profile == "high" and any(p.lower().startswith("640c") for p in receives)
    plid, made = ("640c1f", "high") if takes_high else ("42e01f", "baseline")
    assert "H264" in (later.get("codec") or "")
    assert f"profile-level-id={plid}" in (later.get("sdpFmtpLine") or ""), (receives, later)
    assert any("event=video_codec" in l and f"profile={made}" in l for l in daemon.stderr_lines), \
        (receives, [l for l in daemon.stderr_lines if "video_codec" in l])
    assert later["framesDecoded"] >= first["framesDecoded"] + 30
    for got, want in samples:
        assert max(abs(got[k] - w) for k, w in zip("rgb", want)) <= 16, (got, want)
    assert rc == 0
