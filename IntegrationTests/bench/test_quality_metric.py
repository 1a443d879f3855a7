"""The quality bench's measure (IntegrationTests/castkit/bench/quality.py) and its content (content.py):
SSIM and PSNR on luma behave as the definitions say and agree with ffmpeg's ssim/psnr
filters; the content is a pure function of the timecode it shows, and that timecode reads back."""

import re
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from castkit.bench import content, quality, timecode


def page(w=320, h=240) -> np.ndarray:
    """A grey picture with text and shapes: structure for SSIM to see."""
    img = Image.new("L", (w, h), 235)
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", 14)
    for i in range(12):
        d.text((8, 6 + i * 19), f"{i:2d} the frame rate of the encoder {i * 37}", fill=20, font=font)
    d.rectangle((200, 150, 300, 220), fill=90)
    return np.asarray(img, np.uint8)


def blurred(y: np.ndarray, radius: float) -> np.ndarray:
    return np.asarray(Image.fromarray(y).filter(ImageFilter.GaussianBlur(radius)), np.uint8)


def noisy(y: np.ndarray, sigma: float, seed: int = 1) -> np.ndarray:
    n = np.random.default_rng(seed).normal(0, sigma, y.shape)
    return np.clip(np.rint(y + n), 0, 255).astype(np.uint8)


def test_identical_pictures_score_one_and_the_psnr_cap():
    y = page()
    assert quality.ssim(y, y.copy()) == pytest.approx(1.0, abs=1e-12)
    assert quality.psnr(y, y.copy()) == quality.PSNR_CAP == 100.0


@pytest.mark.parametrize("offset", [1, 3, 10])
def test_a_uniform_offset_gives_the_psnr_of_the_formula(offset):
    y = page().astype(np.int16)
    shifted = np.clip(y + offset, 0, 255)
    mse = np.mean(np.square(shifted - y))        # clipping at 255 leaves some pixels closer
    assert quality.psnr(y.astype(np.uint8), shifted.astype(np.uint8)) == pytest.approx(10 * np.log10(255**2 / mse), abs=1e-9)
    flat = np.full((64, 64), 100, np.uint8)
    assert quality.psnr(flat, flat + offset) == pytest.approx(20 * np.log10(255 / offset), abs=1e-9)


def test_blur_scores_lower_and_more_blur_or_noise_lower_still():
    y = page()
    light, heavy = blurred(y, 0.8), blurred(y, 2.0)
    s_light, s_heavy = quality.ssim(y, light), quality.ssim(y, heavy)
    assert 1.0 > s_light > s_heavy
    assert quality.psnr(y, light) > quality.psnr(y, heavy)
    s_n5, s_n20 = quality.ssim(y, noisy(y, 5)), quality.ssim(y, noisy(y, 20))
    assert 1.0 > s_n5 > s_n20
    assert quality.psnr(y, noisy(y, 5)) > quality.psnr(y, noisy(y, 20))


def test_both_measures_are_symmetric():
    y, z = page(), noisy(blurred(page(), 1.2), 8)
    assert quality.ssim(y, z) == pytest.approx(quality.ssim(z, y), abs=1e-12)
    assert quality.psnr(y, z) == quality.psnr(z, y)


def test_pictures_of_different_sizes_are_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="scale the reference"):
        quality.ssim(page(), page(330, 240))
    assert quality.scale_to(page(640, 480), 320, 240).shape == (240, 320)


def test_luma_is_bt709_limited_range():
    px = np.array([[0x000000, 0xFFFFFF, 0xFF0000, 0x00FF00, 0x0000FF]], np.uint32)
    # 16 + 219 · Kr/Kg/Kb: 62.56 → 63, 172.63 → 173, 31.81 → 32
    assert quality.luma709(px).tolist() == [[16, 235, 63, 173, 32]]


def _ffmpeg(a: np.ndarray, b: np.ndarray, tmp_path) -> tuple[float, float]:
    pa, pb = tmp_path / "a.png", tmp_path / "b.png"
    Image.fromarray(a, "L").save(pa)
    Image.fromarray(b, "L").save(pb)
    out = subprocess.run(["ffmpeg", "-hide_banner", "-nostdin", "-i", str(pa), "-i", str(pb), "-lavfi",
                          "[0:v][1:v]ssim;[0:v][1:v]psnr", "-f", "null", "-"],
                         capture_output=True, text=True, check=True).stderr
    ssim = float(re.search(r"SSIM .*?All:([0-9.]+)", out).group(1))
    psnr = float(re.search(r"PSNR .*?average:([0-9.]+|inf)", out).group(1))
    return ssim, psnr


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg is not installed")
@pytest.mark.parametrize("degrade", ["blur", "noise"])
def test_agrees_with_ffmpeg_ssim_and_psnr(degrade, tmp_path):
    # ffmpeg's ssim filter averages 8×8 windows on a 4-pixel grid (x264's form), ours the
    # Gaussian window of the paper: close, not equal. Its psnr is the same formula.
    y = page()
    z = blurred(y, 1.0) if degrade == "blur" else noisy(y, 10)
    f_ssim, f_psnr = _ffmpeg(y, z, tmp_path)
    assert quality.ssim(y, z) == pytest.approx(f_ssim, abs=0.02)
    assert quality.psnr(y, z) == pytest.approx(f_psnr, abs=0.01)


@pytest.mark.parametrize("name", content.CONTENTS)
def test_content_is_a_function_of_its_timecode_which_reads_back(name):
    c = content.Content(name, 640, 360)
    v = 123_456_789
    a, again = content.render(c, v, 7), content.render(c, v, 7)
    assert np.array_equal(a, again)
    assert timecode.read_luma(quality.luma709(a), 1.0) == (v, 7)
    later = content.render(c, v + (content.SLIDE_S * 1_000_000 if name == "slides" else 1_000_000), 7)
    below = (slice(200, 360), slice(0, 640))       # away from the timecode
    assert not np.array_equal(a[below], later[below])   # the content moves (slides: the next slide)


def test_a_slide_stays_still_within_its_five_seconds():
    c = content.Content("slides", 640, 360)
    start = 10 * content.SLIDE_S * 1_000_000
    a, b = content.render(c, start, 0), content.render(c, start + 4_900_000, 0)
    below = (slice(200, 360), slice(0, 640))
    assert np.array_equal(a[below], b[below])


@pytest.mark.parametrize("name", ["text", "video"])
def test_the_painted_screen_is_exactly_what_render_redraws(name):
    """A real Xvfb screen with the painter drawing the content: screenshots whose timecode
    reads back equal content.render of that timecode, pixel for pixel."""
    from Xlib import X, display as xdisplay

    from castkit.bench.screen import BenchScreen
    with BenchScreen(640, 360, "static", timecode=True, fps=30, content=name) as screen:
        d = xdisplay.Display(screen.display)
        root = d.screen().root
        c = content.Content(name, 640, 360)
        matched = 0
        for _ in range(20):
            raw = root.get_image(0, 0, 640, 360, X.ZPixmap, 0xFFFFFFFF).data
            px = np.frombuffer(raw, np.uint32).reshape(360, 640) & 0xFFFFFF
            got = timecode.read_luma(quality.luma709(px), 1.0)
            if got is None:
                continue           # caught between the content's copy and the timecode: skipped
            assert np.array_equal(px, content.render(c, *got))
            matched += 1
        d.close()
    assert matched >= 10


def test_the_bench_compares_each_kept_frame_with_the_source_of_its_timecode():
    """bench.measure_quality on frames as the receiver keeps them: an exact decode scores
    SSIM 1 and the cap, a blurred one less, one showing another time's picture much less,
    a half-size decode is compared with the reference scaled down; summary gives mean and p5."""
    from castkit.bench import bench
    c = content.Content("text", 640, 360)
    v = 40_000_000
    exact = quality.luma709(content.render(c, v, 1))
    other = quality.luma709(content.render(c, v + 3_000_000, 1))   # 3 lines further down the page
    half = quality.scale_to(exact, 320, 180)
    rows = bench.measure_quality(c, [(10.0, v, 1, exact), (10.25, v, 1, blurred(exact, 1.0)),
                                     (10.5, v, 1, other), (10.75, v, 1, half)], 9.0)["quality_per_frame"]
    assert [r[0] for r in rows] == [1.0, 1.25, 1.5, 1.75]
    assert rows[0][1:] == [1.0, 100.0]
    assert 0.8 < rows[1][1] < 1.0 and rows[2][1] < rows[1][1] - 0.1 and rows[2][2] < rows[1][2] - 5
    assert rows[3][1:] == [1.0, 100.0]
    s = quality.summary([r[1] for r in rows], [r[2] for r in rows])
    assert s["quality_frames"] == 4 and s["ssim_p5"] == pytest.approx(rows[2][1], abs=1e-4) and s["ssim_mean"] < 1.0


def test_the_reference_luma_follows_what_the_stream_signals():
    """BT.709 or BT.601, limited or full range, by the decoded frames' (colorspace, color_range);
    nothing signalled is BT.709 at limited range, as castd and the GStreamer sender code it."""
    px = np.array([[0xFFFFFF, 0x000000, 0xFF0000, 0x00FF00]], np.uint32)
    assert quality.luma_as_signalled(px, (1, 1)).tolist() == [[235, 16, 63, 173]]
    assert quality.luma_as_signalled(px, None).tolist() == quality.luma709(px).tolist()
    assert quality.luma_as_signalled(px, (1, 2)).tolist() == [[255, 0, 54, 182]]
    assert quality.luma_as_signalled(px, (6, 2)).tolist() == [[255, 0, 76, 150]]
    assert quality.luma_as_signalled(px, (5, 1)).tolist() == [[235, 16, 81, 145]]


def test_a_vp8_stream_is_read_as_bt601_and_an_h264_one_as_it_signals():
    # aiortc's libvpx decoder leaves colorspace unspecified (2); VP8 has only BT.601
    assert quality.signalled_color((2, 0), "vp8") == (quality.BT601, 0)
    assert quality.signalled_color(None, "vp8") == (quality.BT601, 1)
    assert quality.signalled_color((2, 2), "vp8") == (quality.BT601, 2)
    assert quality.signalled_color((1, 1), "vp8") == (1, 1)      # a decoder that says BT.709 is believed
    assert quality.signalled_color((2, 0), "h264") == (2, 0)     # H.264: unsigned stays BT.709 (luma_as_signalled)
    assert quality.signalled_color(None, "h264") is None


def test_both_ranges_are_compared_on_one_scale():
    """A one-code error reads the same PSNR in full range as in codes, and 20·log10(255/219) lower
    in limited range, where a code is a larger step on the screen."""
    ref = np.full((32, 32), 128, np.uint8)
    off = ref + 1
    full = quality.psnr(quality.on_full_scale(off, (1, 2)), quality.on_full_scale(ref, (1, 2)))
    limited = quality.psnr(quality.on_full_scale(off, (1, 1)), quality.on_full_scale(ref, (1, 1)))
    assert full == pytest.approx(quality.psnr(off, ref)) == pytest.approx(20 * np.log10(255))
    assert full - limited == pytest.approx(20 * np.log10(255 / 219))
    assert quality.on_full_scale(np.array([16, 235], np.uint8), None).tolist() == [0.0, 255.0]
