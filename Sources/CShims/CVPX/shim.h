// libvpx (the VP8 encoder). Its init and control calls are macros or
// variadic functions, which Swift cannot call: typed wrappers here.
#pragma once
#include <vpx/vpx_encoder.h>
#include <vpx/vp8cx.h>

static inline vpx_codec_iface_t *castd_vpx_vp8_cx(void) { return vpx_codec_vp8_cx(); }

static inline vpx_codec_err_t castd_vpx_enc_init(vpx_codec_ctx_t *ctx, const vpx_codec_enc_cfg_t *cfg) {
    return vpx_codec_enc_init(ctx, vpx_codec_vp8_cx(), cfg, 0);
}

static inline vpx_codec_err_t castd_vpx_control_int(vpx_codec_ctx_t *ctx, int id, int value) {
    return vpx_codec_control_(ctx, id, value);
}

static inline vpx_codec_err_t castd_vpx_control_uint(vpx_codec_ctx_t *ctx, int id, unsigned int value) {
    return vpx_codec_control_(ctx, id, value);
}

static const long castd_vpx_dl_realtime = VPX_DL_REALTIME;
static const vpx_enc_frame_flags_t castd_vpx_eflag_force_kf = VPX_EFLAG_FORCE_KF;
static const int castd_vpx_frame_is_key = VPX_FRAME_IS_KEY;
static const vpx_codec_er_flags_t castd_vpx_error_resilient_default = VPX_ERROR_RESILIENT_DEFAULT;
