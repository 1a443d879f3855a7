// libpipewire-0.3 and the SPA headers its streams need.
#pragma once
#include <pipewire/pipewire.h>
#include <spa/param/video/format-utils.h>
#include <spa/param/video/type-info.h>
#include <spa/param/audio/format-utils.h>
#include <spa/param/buffers.h>
#include <spa/pod/builder.h>
#include <spa/buffer/meta.h>
#include <spa/debug/types.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/dma-buf.h>

// Function-like macros Swift cannot import.
static inline const char *castd_pw_headers_version(void) { return pw_get_headers_version(); }

static inline int castd_pw_core_add_listener(struct pw_core *core, struct spa_hook *hook,
                                             const struct pw_core_events *events, void *data) {
    return pw_core_add_listener(core, hook, events, data);
}

// SPA pods are built with macros and variadic inlines; these helpers build the
// few castd needs into a caller's buffer (NULL when it is too small).

/// A video/raw format object: `formats` (one fixed value, or an enumeration
/// whose first entry is the default), a size (fixed when min == max, else a
/// range) and a frame rate (fixed when min == max, else a range).
/// `param_id` is SPA_PARAM_EnumFormat or SPA_PARAM_Format.
/// With `n_modifiers` > 0 the object carries a DRM modifier property (the
/// DMA-BUF variant of the format): an enumeration of `modifiers` with
/// `modifier_flags` (SPA_POD_PROP_FLAG_*); without, it describes shared memory.
static inline const struct spa_pod *castd_pw_video_format(
    uint8_t *buf, uint32_t buf_size, uint32_t param_id,
    const uint32_t *formats, uint32_t n_formats,
    uint32_t def_w, uint32_t def_h, uint32_t min_w, uint32_t min_h, uint32_t max_w, uint32_t max_h,
    uint32_t fps_def, uint32_t fps_min, uint32_t fps_max,
    const uint64_t *modifiers, uint32_t n_modifiers, uint32_t modifier_flags) {
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buf, buf_size);
    struct spa_pod_frame obj, choice;
    if (n_formats == 0) return NULL;
    spa_pod_builder_push_object(&b, &obj, SPA_TYPE_OBJECT_Format, param_id);
    spa_pod_builder_add(&b,
        SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video),
        SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw), 0);
    spa_pod_builder_prop(&b, SPA_FORMAT_VIDEO_format, 0);
    if (n_formats == 1) {
        spa_pod_builder_id(&b, formats[0]);
    } else {
        spa_pod_builder_push_choice(&b, &choice, SPA_CHOICE_Enum, 0);
        spa_pod_builder_id(&b, formats[0]);
        for (uint32_t i = 0; i < n_formats; i++) spa_pod_builder_id(&b, formats[i]);
        spa_pod_builder_pop(&b, &choice);
    }
    struct spa_rectangle def = SPA_RECTANGLE(def_w, def_h), mn = SPA_RECTANGLE(min_w, min_h), mx = SPA_RECTANGLE(max_w, max_h);
    if (min_w == max_w && min_h == max_h) {
        spa_pod_builder_add(&b, SPA_FORMAT_VIDEO_size, SPA_POD_Rectangle(&def), 0);
    } else {
        spa_pod_builder_add(&b, SPA_FORMAT_VIDEO_size, SPA_POD_CHOICE_RANGE_Rectangle(&def, &mn, &mx), 0);
    }
    struct spa_fraction fd = SPA_FRACTION(fps_def, 1), fmin = SPA_FRACTION(fps_min, 1), fmax = SPA_FRACTION(fps_max, 1);
    if (fps_min == fps_max) {
        spa_pod_builder_add(&b, SPA_FORMAT_VIDEO_framerate, SPA_POD_Fraction(&fd), 0);
    } else {
        spa_pod_builder_add(&b, SPA_FORMAT_VIDEO_framerate, SPA_POD_CHOICE_RANGE_Fraction(&fd, &fmin, &fmax), 0);
    }
    if (n_modifiers > 0) {
        spa_pod_builder_prop(&b, SPA_FORMAT_VIDEO_modifier, modifier_flags);
        spa_pod_builder_push_choice(&b, &choice, SPA_CHOICE_Enum, 0);
        spa_pod_builder_long(&b, (int64_t)modifiers[0]);
        for (uint32_t i = 0; i < n_modifiers; i++) spa_pod_builder_long(&b, (int64_t)modifiers[i]);
        spa_pod_builder_pop(&b, &choice);
    }
    if (b.state.offset > buf_size) return NULL;
    return (const struct spa_pod *)spa_pod_builder_pop(&b, &obj);
}

/// The Buffers param: which memory types this side accepts (a bit per
/// SPA_DATA_* type); `size`/`stride` 0 leave them to the other side.
static inline const struct spa_pod *castd_pw_buffers_param(
    uint8_t *buf, uint32_t buf_size, uint32_t data_types, uint32_t size, uint32_t stride) {
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buf, buf_size);
    const struct spa_pod *p;
    if (size == 0) {
        p = (const struct spa_pod *)spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers,
            SPA_PARAM_BUFFERS_buffers, SPA_POD_CHOICE_RANGE_Int(4, 2, 16),
            SPA_PARAM_BUFFERS_blocks, SPA_POD_Int(1),
            SPA_PARAM_BUFFERS_dataType, SPA_POD_CHOICE_FLAGS_Int((int)data_types));
    } else {
        p = (const struct spa_pod *)spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers,
            SPA_PARAM_BUFFERS_buffers, SPA_POD_CHOICE_RANGE_Int(4, 2, 16),
            SPA_PARAM_BUFFERS_blocks, SPA_POD_Int(1),
            SPA_PARAM_BUFFERS_size, SPA_POD_Int((int)size),
            SPA_PARAM_BUFFERS_stride, SPA_POD_Int((int)stride),
            SPA_PARAM_BUFFERS_dataType, SPA_POD_CHOICE_FLAGS_Int((int)data_types));
    }
    return b.state.offset > buf_size ? NULL : p;
}

/// Bytes of cursor metadata holding a `w`×`h` 32-bit bitmap.
static inline uint32_t castd_pw_cursor_meta_size(uint32_t w, uint32_t h) {
    return (uint32_t)(sizeof(struct spa_meta_cursor) + sizeof(struct spa_meta_bitmap) + w * h * 4);
}

/// A Meta param: metadata `type` (SPA_META_*) of `def` bytes, between `min` and `max`.
static inline const struct spa_pod *castd_pw_meta_param(uint8_t *buf, uint32_t buf_size, uint32_t type,
                                                        uint32_t def, uint32_t min, uint32_t max) {
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buf, buf_size);
    const struct spa_pod *p;
    if (min == max) {
        p = (const struct spa_pod *)spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
            SPA_PARAM_META_type, SPA_POD_Id(type),
            SPA_PARAM_META_size, SPA_POD_Int((int)def));
    } else {
        p = (const struct spa_pod *)spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
            SPA_PARAM_META_type, SPA_POD_Id(type),
            SPA_PARAM_META_size, SPA_POD_CHOICE_RANGE_Int((int)def, (int)min, (int)max));
    }
    return b.state.offset > buf_size ? NULL : p;
}

static inline uint32_t castd_pw_meta_region_size(void) { return (uint32_t)sizeof(struct spa_meta_region); }
static inline uint32_t castd_pw_meta_header_size(void) { return (uint32_t)sizeof(struct spa_meta_header); }

/// A negotiated video/raw format. Returns 0, or -1 for a pod that is not a
/// format, -2 for another media type, -3 for a raw video format it cannot read.
static inline int castd_pw_parse_video_format(const struct spa_pod *param, uint32_t *format,
                                              uint32_t *width, uint32_t *height, uint64_t *modifier) {
    uint32_t media_type = 0, media_subtype = 0;
    struct spa_video_info_raw info;
    if (param == NULL || spa_format_parse(param, &media_type, &media_subtype) < 0) return -1;
    if (media_type != SPA_MEDIA_TYPE_video || media_subtype != SPA_MEDIA_SUBTYPE_raw) return -2;
    memset(&info, 0, sizeof(info));
    if (spa_format_video_raw_parse(param, &info) < 0) return -3;
    *format = info.format;
    *width = info.size.width;
    *height = info.size.height;
    *modifier = info.modifier;
    return 0;
}

/// The DRM modifier property of a negotiated format (DMA-BUF negotiation):
/// 0 when there is none (shared memory); 1 when it holds one value, in
/// `*modifier`; 2 when the producer has yet to choose (flagged DONT_FIXATE or
/// still several values; `*modifier` is the first); -1 when it is not a long.
static inline int castd_pw_format_modifier(const struct spa_pod *param, uint64_t *modifier) {
    const struct spa_pod_prop *prop;
    const struct spa_pod *values;
    uint32_t n = 0, choice = 0;
    *modifier = 0;
    if (param == NULL || (prop = spa_pod_find_prop(param, NULL, SPA_FORMAT_VIDEO_modifier)) == NULL) return 0;
    values = spa_pod_get_values(&prop->value, &n, &choice);
    if (n < 1 || !spa_pod_is_long(values)) return -1;
    *modifier = (uint64_t)SPA_POD_VALUE(struct spa_pod_long, values);
    if ((prop->flags & SPA_POD_PROP_FLAG_DONT_FIXATE) != 0) return 2;
    if (choice != SPA_CHOICE_None && n > 1) {
        /* An enumeration: its first entry is the default; all entries equal is one value. */
        const uint64_t *all = (const uint64_t *)SPA_POD_BODY_CONST(values);
        for (uint32_t i = 1; i < n; i++) if (all[i] != all[0]) return 2;
    }
    return 1;
}

// DMA-BUF frames read by the CPU (linear layout only).

/// DMA_BUF_IOCTL_SYNC around a CPU read of a mapped DMA-BUF: `start` 1 before
/// the read, 0 after. 0, or -errno (-ENOTTY or -EINVAL for an fd that is not a
/// dma-buf, such as a memfd passed as one).
static inline int castd_dmabuf_sync_read(int fd, int start) {
    struct dma_buf_sync sync;
    int r;
    sync.flags = DMA_BUF_SYNC_READ | (start ? DMA_BUF_SYNC_START : DMA_BUF_SYNC_END);
    do { r = ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync); } while (r < 0 && (errno == EINTR || errno == EAGAIN));
    return r < 0 ? -errno : 0;
}

/// A memfd of `size` bytes (tests' stand-in for a linear DMA-BUF), or -1 (errno set).
static inline int castd_memfd(const char *name, uint64_t size) {
    /* memfd_create(2) by number: glibc declares it only under _GNU_SOURCE. 1 is MFD_CLOEXEC. */
    int fd = (int)syscall(SYS_memfd_create, name, 1u);
    if (fd < 0) return -1;
    if (ftruncate(fd, (off_t)size) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/// The damage rectangles of a buffer as (x, y, w, h) quadruples in `out`
/// (room for `max` of them). Returns -1 when the buffer has no damage
/// metadata, else how many valid regions it holds (may exceed `max`: the
/// caller then treats the whole frame as changed).
static inline int castd_pw_damage(const struct spa_buffer *buf, int32_t *out, int max) {
    struct spa_meta *m = spa_buffer_find_meta(buf, SPA_META_VideoDamage);
    struct spa_meta_region *r;
    int n = 0;
    if (m == NULL) return -1;
    spa_meta_for_each(r, m) {
        if (!spa_meta_region_is_valid(r)) break;
        if (n < max) {
            out[4 * n] = r->region.position.x;
            out[4 * n + 1] = r->region.position.y;
            out[4 * n + 2] = (int32_t)r->region.size.width;
            out[4 * n + 3] = (int32_t)r->region.size.height;
        }
        n++;
    }
    return n;
}

/// Cursor metadata, bounds-checked against the metadata's size.
struct castd_pw_cursor {
    uint32_t id;
    int32_t x, y, hot_x, hot_y;
    /// 0 when this buffer carries no new bitmap (only a position).
    uint32_t bitmap_format, bitmap_width, bitmap_height;
    int32_t bitmap_stride;
    const uint8_t *bitmap;
};

/// 1 when the buffer carries valid cursor metadata (filled into `out`), 0 otherwise.
static inline int castd_pw_cursor(const struct spa_buffer *buf, struct castd_pw_cursor *out) {
    struct spa_meta *m = spa_buffer_find_meta(buf, SPA_META_Cursor);
    struct spa_meta_cursor *c;
    memset(out, 0, sizeof(*out));
    if (m == NULL || m->size < sizeof(struct spa_meta_cursor)) return 0;
    c = (struct spa_meta_cursor *)m->data;
    if (!spa_meta_cursor_is_valid(c)) return 0;
    out->id = c->id;
    out->x = c->position.x;
    out->y = c->position.y;
    out->hot_x = c->hotspot.x;
    out->hot_y = c->hotspot.y;
    if (c->bitmap_offset >= sizeof(struct spa_meta_cursor) &&
        (uint64_t)c->bitmap_offset + sizeof(struct spa_meta_bitmap) <= m->size) {
        struct spa_meta_bitmap *bm = SPA_PTROFF(c, c->bitmap_offset, struct spa_meta_bitmap);
        uint64_t w = bm->size.width, h = bm->size.height, stride = (uint64_t)(bm->stride > 0 ? bm->stride : 0);
        uint64_t end = (uint64_t)c->bitmap_offset + bm->offset + stride * h;
        if (bm->format != 0 && w > 0 && h > 0 && w <= 1024 && h <= 1024 && stride >= w * 4 &&
            bm->offset >= sizeof(struct spa_meta_bitmap) && end <= m->size) {
            out->bitmap_format = bm->format;
            out->bitmap_width = (uint32_t)w;
            out->bitmap_height = (uint32_t)h;
            out->bitmap_stride = (int32_t)stride;
            out->bitmap = SPA_PTROFF(bm, bm->offset, const uint8_t);
        }
    }
    return 1;
}

/// Writes cursor metadata into a producer's buffer (tests' pattern source):
/// a position and, when `pixels` is not NULL, a `w`×`h` BGRA bitmap. Returns
/// 0, or -1 when the buffer has no cursor metadata large enough.
static inline int castd_pw_set_cursor(struct spa_buffer *buf, uint32_t id, int32_t x, int32_t y,
                                      int32_t hot_x, int32_t hot_y, const uint32_t *pixels, uint32_t w, uint32_t h) {
    struct spa_meta *m = spa_buffer_find_meta(buf, SPA_META_Cursor);
    struct spa_meta_cursor *c;
    if (m == NULL || m->size < castd_pw_cursor_meta_size(pixels ? w : 0, pixels ? h : 0)) return -1;
    c = (struct spa_meta_cursor *)m->data;
    c->id = id;
    c->flags = 0;
    c->position.x = x;
    c->position.y = y;
    c->hotspot.x = hot_x;
    c->hotspot.y = hot_y;
    c->bitmap_offset = 0;
    if (pixels != NULL) {
        struct spa_meta_bitmap *bm;
        c->bitmap_offset = sizeof(struct spa_meta_cursor);
        bm = SPA_PTROFF(c, c->bitmap_offset, struct spa_meta_bitmap);
        bm->format = SPA_VIDEO_FORMAT_BGRA;
        bm->size.width = w;
        bm->size.height = h;
        bm->stride = (int32_t)(w * 4);
        bm->offset = sizeof(struct spa_meta_bitmap);
        memcpy(SPA_PTROFF(bm, bm->offset, void), pixels, (size_t)w * h * 4);
    }
    return 0;
}

/// Writes damage metadata into a producer's buffer: `n` (x, y, w, h)
/// quadruples, terminated by an invalid region when room remains. Returns
/// how many were written, -1 without damage metadata.
static inline int castd_pw_set_damage(struct spa_buffer *buf, const int32_t *rects, int n) {
    struct spa_meta *m = spa_buffer_find_meta(buf, SPA_META_VideoDamage);
    struct spa_meta_region *r;
    int i = 0;
    if (m == NULL) return -1;
    spa_meta_for_each(r, m) {
        if (i < n) {
            r->region.position.x = rects[4 * i];
            r->region.position.y = rects[4 * i + 1];
            r->region.size.width = (uint32_t)rects[4 * i + 2];
            r->region.size.height = (uint32_t)rects[4 * i + 3];
        } else {
            r->region.position.x = 0;
            r->region.position.y = 0;
            r->region.size.width = 0;
            r->region.size.height = 0;
            break;
        }
        i++;
    }
    return i < n ? i : n;
}

/// The video crop of a buffer (SPA_META_VideoCrop: where a window is in a larger stream) as
/// (x, y, w, h) in `out`: 1 when the buffer carries a valid one, else 0.
static inline int castd_pw_video_crop(const struct spa_buffer *buf, int32_t *out) {
    struct spa_meta_region *r = spa_buffer_find_meta_data(buf, SPA_META_VideoCrop, sizeof(*r));
    if (r == NULL || !spa_meta_region_is_valid(r)) return 0;
    out[0] = r->region.position.x;
    out[1] = r->region.position.y;
    out[2] = (int32_t)r->region.size.width;
    out[3] = (int32_t)r->region.size.height;
    return 1;
}

/// Writes the video crop into a producer's buffer (tests' pattern source). 0, or -1 without crop metadata.
static inline int castd_pw_set_video_crop(struct spa_buffer *buf, int32_t x, int32_t y, uint32_t w, uint32_t h) {
    struct spa_meta_region *r = spa_buffer_find_meta_data(buf, SPA_META_VideoCrop, sizeof(*r));
    if (r == NULL) return -1;
    r->region.position.x = x;
    r->region.position.y = y;
    r->region.size.width = w;
    r->region.size.height = h;
    return 0;
}

/// The header metadata's flags (SPA_META_HEADER_FLAG_*), 0 without a header.
static inline uint32_t castd_pw_header_flags(const struct spa_buffer *buf) {
    struct spa_meta_header *h = spa_buffer_find_meta_data(buf, SPA_META_Header, sizeof(*h));
    return h ? h->flags : 0;
}

// The registry (castd watches its target node go away).
static inline struct pw_registry *castd_pw_core_get_registry(struct pw_core *core) {
    return pw_core_get_registry(core, PW_VERSION_REGISTRY, 0);
}
static inline int castd_pw_registry_add_listener(struct pw_registry *registry, struct spa_hook *hook,
                                                 const struct pw_registry_events *events, void *data) {
    return pw_registry_add_listener(registry, hook, events, data);
}
static inline void castd_pw_registry_destroy(struct pw_registry *registry) {
    pw_proxy_destroy((struct pw_proxy *)registry);
}
static inline uint32_t castd_pw_version_registry_events(void) { return PW_VERSION_REGISTRY_EVENTS; }

// Audio (desktop audio capture).

/// An audio/raw format object for `param_id` (SPA_PARAM_EnumFormat or
/// SPA_PARAM_Format): one sample format, rate and channel count, with the
/// standard positions for 1 (MONO) or 2 (FL, FR) channels.
static inline const struct spa_pod *castd_pw_audio_format(uint8_t *buf, uint32_t buf_size, uint32_t param_id,
                                                          uint32_t format, uint32_t rate, uint32_t channels) {
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buf, buf_size);
    struct spa_audio_info_raw info;
    const struct spa_pod *p;
    memset(&info, 0, sizeof(info));
    info.format = (enum spa_audio_format)format;
    info.rate = rate;
    info.channels = channels;
    if (channels == 1) {
        info.position[0] = SPA_AUDIO_CHANNEL_MONO;
    } else if (channels == 2) {
        info.position[0] = SPA_AUDIO_CHANNEL_FL;
        info.position[1] = SPA_AUDIO_CHANNEL_FR;
    } else {
        info.flags |= SPA_AUDIO_FLAG_UNPOSITIONED;
    }
    p = spa_format_audio_raw_build(&b, param_id, &info);
    return b.state.offset > buf_size ? NULL : p;
}

/// A negotiated audio/raw format. Returns 0, or -1 for a pod that is not a
/// format, -2 for another media type, -3 for a raw audio format it cannot read.
static inline int castd_pw_parse_audio_format(const struct spa_pod *param, uint32_t *format,
                                              uint32_t *rate, uint32_t *channels) {
    uint32_t media_type = 0, media_subtype = 0;
    struct spa_audio_info_raw info;
    if (param == NULL || spa_format_parse(param, &media_type, &media_subtype) < 0) return -1;
    if (media_type != SPA_MEDIA_TYPE_audio || media_subtype != SPA_MEDIA_SUBTYPE_raw) return -2;
    memset(&info, 0, sizeof(info));
    if (spa_format_audio_raw_parse(param, &info) < 0) return -3;
    *format = info.format;
    *rate = info.rate;
    *channels = info.channels;
    return 0;
}

/// A string property of a registry global's dictionary, or NULL.
static inline const char *castd_pw_dict_get(const struct spa_dict *dict, const char *key) {
    return dict ? spa_dict_lookup(dict, key) : NULL;
}

/// Asks the daemon for a `done` event with the returned sequence number once
/// everything sent before (e.g. the registry's globals) has been processed.
static inline int castd_pw_core_sync(struct pw_core *core, int seq) { return pw_core_sync(core, PW_ID_CORE, seq); }
