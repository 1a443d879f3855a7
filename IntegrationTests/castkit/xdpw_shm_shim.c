/* Test rig only (castkit/sway_rig.py): LD_PRELOADed into xdg-desktop-portal-wlr 0.7, nothing else.
 *
 * Why: portal-wlr 0.7's start_screencast refuses to start a cast ("wlroots: unable to receive a valid
 * format from wlr_screencopy") unless the first screencopy frame announced a DMA-BUF format with the
 * `linux_dmabuf` event, because it tests its own ScreenCast interface version (4) where it means the
 * screencopy version. Sway's software (pixman) renderer has no DMA-BUF, so wlroots never sends that
 * event and the cast never starts (upstream xdg-desktop-portal-wlr issue 289).
 *
 * What: when the portal adds its listener to a zwlr_screencopy_frame_v1, this wraps the listener's
 * `buffer` handler so that, after the real `buffer` event (the shared-memory format, size and stride),
 * the portal's own `linux_dmabuf` handler is also called with the same format as a DRM fourcc and the
 * same size. The portal then passes its check; since the compositor offers no zwp_linux_dmabuf_v1 (so
 * no modifiers), it offers PipeWire shared memory (MemFd) buffers only and copies frames with wl_shm,
 * exactly as it would with a screencopy that has no DMA-BUF at all. No event reaches the compositor. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

struct wl_proxy;
const char *wl_proxy_get_class(struct wl_proxy *proxy);

/* zwlr_screencopy_frame_v1's events, in protocol order (wlr-screencopy-unstable-v1, version 3). */
struct frame_listener {
    void (*buffer)(void *data, void *frame, uint32_t format, uint32_t width, uint32_t height, uint32_t stride);
    void (*flags)(void *data, void *frame, uint32_t flags);
    void (*ready)(void *data, void *frame, uint32_t tv_sec_hi, uint32_t tv_sec_lo, uint32_t tv_nsec);
    void (*failed)(void *data, void *frame);
    void (*damage)(void *data, void *frame, uint32_t x, uint32_t y, uint32_t width, uint32_t height);
    void (*linux_dmabuf)(void *data, void *frame, uint32_t format, uint32_t width, uint32_t height);
    void (*buffer_done)(void *data, void *frame);
};

static const struct frame_listener *original;   /* the portal uses one listener for every frame */
static struct frame_listener wrapped;

static void buffer_then_announce(void *data, void *frame, uint32_t format, uint32_t width, uint32_t height,
                                 uint32_t stride) {
    original->buffer(data, frame, format, width, height, stride);
    /* wl_shm formats are DRM fourccs except ARGB8888 (0) and XRGB8888 (1). */
    uint32_t fourcc = format == 0 ? 0x34325241u /* AR24 */ : format == 1 ? 0x34325258u /* XR24 */ : format;
    if (original->linux_dmabuf)
        original->linux_dmabuf(data, frame, fourcc, width, height);
}

int wl_proxy_add_listener(struct wl_proxy *proxy, void (**implementation)(void), void *data) {
    static int (*real)(struct wl_proxy *, void (**)(void), void *);
    if (!real)
        real = (int (*)(struct wl_proxy *, void (**)(void), void *))dlsym(RTLD_NEXT, "wl_proxy_add_listener");
    const char *cls = wl_proxy_get_class(proxy);
    if (cls && strcmp(cls, "zwlr_screencopy_frame_v1") == 0 && implementation) {
        original = (const struct frame_listener *)implementation;
        wrapped = *original;
        wrapped.buffer = buffer_then_announce;
        implementation = (void (**)(void))&wrapped;
    }
    return real(proxy, implementation, data);
}
