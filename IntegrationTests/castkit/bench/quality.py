"""Picture quality of a decoded frame against its source (issue 32): SSIM and PSNR on luma.

Luma: BT.709 at limited range (Y' = 16 + 219 · (0.2126 R + 0.7152 G + 0.0722 B) / 255,
rounded), the conversion castd's H.264 path and the bench's GStreamer sender both make
(PixelConverter / BT709.swift; gst.source's colorimetry=bt709), compared with the decoded
frame's own Y plane as the decoder produced it: no conversion on the receiving side.

SSIM: Wang, Bovik, Sheikh, Simoncelli (IEEE TIP 2004): an 11 × 11 Gaussian window with
σ = 1.5, K1 = 0.01, K2 = 0.03, L = 255, over the windows that fit the picture (no padding),
the mean of the SSIM map. PSNR: 10 · log10(255² / MSE), 255 the peak, capped at
PSNR_CAP dB (identical pictures, MSE 0, give the cap instead of infinity).
"""
from __future__ import annotations

import numpy as np

PSNR_CAP = 100.0
K1, K2, L = 0.01, 0.03, 255.0
WINDOW, SIGMA = 11, 1.5


# (Kr, Kb) of the luma matrices, by libavcodec's AVColorSpace number (what a decoded frame's
# colorspace says the H.264 VUI signalled): 1 BT.709, 5 BT.470BG and 6 SMPTE 170M (BT.601)
MATRICES = {1: (0.2126, 0.0722), 5: (0.299, 0.114), 6: (0.299, 0.114)}
BT601 = 5         # AVCOL_SPC_BT470BG
FULL_RANGE = 2    # AVColorRange JPEG: Y' 0-255 (1, MPEG, and 0, unspecified: 16-235)


def luma(rgb: np.ndarray, kr: float = 0.2126, kb: float = 0.0722, full_range: bool = False) -> np.ndarray:
    """Y' (uint8) of 0x00RRGGBB pixels (uint32) or an h × w × 3 RGB array: BT.709 at limited
    range by default, or another matrix (Kr, Kb) and full range."""
    if rgb.ndim == 2:
        r, g, b = (rgb >> 16) & 0xFF, (rgb >> 8) & 0xFF, rgb & 0xFF
    else:
        r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    e = kr * r.astype(np.float32) + (1 - kr - kb) * g + kb * b
    y = e if full_range else 16 + 219 * e / 255
    return np.clip(np.rint(y), 0, 255).astype(np.uint8)


def on_full_scale(y: np.ndarray, color: tuple[int, int] | None) -> np.ndarray:
    """A luma picture in full-range units (float): limited-range codes (16-235) stretched to
    0-255, full-range ones as they are. PSNR and SSIM of two streams that code luma in different
    ranges compare only on one scale: a code step of limited range is 255/219 of a full-range
    one on the screen, so in codes limited range would read 20·log10(255/219) = 1.32 dB higher."""
    if color is not None and color[1] == FULL_RANGE:
        return y.astype(np.float64)
    return (y.astype(np.float64) - 16) * (255 / 219)


def luma709(rgb: np.ndarray) -> np.ndarray:
    """Limited-range BT.709 Y' (uint8): what castd's H.264 path and the bench's GStreamer sender make."""
    return luma(rgb)


def luma_as_signalled(rgb: np.ndarray, color: tuple[int, int] | None) -> np.ndarray:
    """Y' as the stream says it coded it: `color` is the decoded frames' (colorspace, color_range)
    (receiver.Recording.color); a receiver shows the picture by the same signal. Chromium's
    canvas sender signals BT.709 at full range; castd and the GStreamer sender BT.709 at limited
    range. Unsigned (None, or an unspecified matrix): BT.709 at limited range."""
    if color is None:
        return luma709(rgb)
    kr, kb = MATRICES.get(color[0], MATRICES[1])
    return luma(rgb, kr, kb, full_range=color[1] == FULL_RANGE)


def signalled_color(color: tuple[int, int] | None, codec: str) -> tuple[int, int] | None:
    """The decoded frames' (colorspace, color_range), with VP8's matrix filled in: a VP8 stream
    has no matrix field but BT.601 (RFC 6386 §9.2, the key frame's color_space bit 0), and
    aiortc's libvpx decoder leaves the frame's colorspace unspecified; castd's VP8 path, libvpx
    and libwebrtc convert with BT.601 at limited range."""
    if codec != "vp8":
        return color
    if color is None:
        return (BT601, 1)
    return color if color[0] in MATRICES else (BT601, color[1])


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    _same_shape(a, b)
    mse = float(np.mean(np.square(a.astype(np.float64) - b.astype(np.float64))))
    if mse == 0:
        return PSNR_CAP
    return float(min(PSNR_CAP, 10 * np.log10(L * L / mse)))


def _gaussian() -> np.ndarray:
    x = np.arange(WINDOW, dtype=np.float64) - (WINDOW - 1) / 2
    g = np.exp(-x * x / (2 * SIGMA * SIGMA))
    return g / g.sum()


def _filter(img: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Separable 'valid' correlation with the window g (rows, then columns)."""
    n = len(g)
    h, w = img.shape
    rows = sum(g[k] * img[:, k:w - n + 1 + k] for k in range(n))
    return sum(g[k] * rows[k:h - n + 1 + k, :] for k in range(n))


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM of two luma pictures of one size (at least 11 × 11)."""
    _same_shape(a, b)
    if min(a.shape) < WINDOW:
        raise ValueError(f"SSIM needs pictures of at least {WINDOW}×{WINDOW} pixels, got {a.shape[1]}×{a.shape[0]}")
    x, y = a.astype(np.float64), b.astype(np.float64)
    g = _gaussian()
    mx, my = _filter(x, g), _filter(y, g)
    sxx = _filter(x * x, g) - mx * mx
    syy = _filter(y * y, g) - my * my
    sxy = _filter(x * y, g) - mx * my
    c1, c2 = (K1 * L) ** 2, (K2 * L) ** 2
    m = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return float(m.mean())


def _same_shape(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ValueError(f"pictures differ in size ({a.shape} and {b.shape}): scale the reference first")


def scale_to(y: np.ndarray, width: int, height: int) -> np.ndarray:
    """A luma picture resized to width × height (bilinear; a no-op at the same size)."""
    if y.shape == (height, width):
        return y
    from PIL import Image
    return np.asarray(Image.fromarray(y, "L").resize((width, height), Image.BILINEAR), np.uint8)


def summary(ssims: list[float], psnrs: list[float]) -> dict:
    """Per run: frames compared, SSIM mean and 5th percentile, PSNR mean (and p5)."""
    from castkit.bench.stats import quantile
    if not ssims:
        return {"quality_frames": 0}
    return {"quality_frames": len(ssims), "ssim_mean": round(sum(ssims) / len(ssims), 4),
            "ssim_p5": round(quantile(ssims, 0.05), 4), "psnr_mean_db": round(sum(psnrs) / len(psnrs), 2),
            "psnr_p5_db": round(quantile(psnrs, 0.05), 2)}
