// libopus (Debian libopus-dev, 1.3). opus_encoder_ctl/opus_decoder_ctl are
// variadic and their request macros are function-like; Swift can call
// neither, so each control castd uses gets a fixed-signature wrapper here.
#pragma once
#include <opus/opus.h>

static inline int castd_opus_set_bitrate(OpusEncoder *e, opus_int32 bps) { return opus_encoder_ctl(e, OPUS_SET_BITRATE(bps)); }
static inline int castd_opus_get_bitrate(OpusEncoder *e, opus_int32 *bps) { return opus_encoder_ctl(e, OPUS_GET_BITRATE(bps)); }
static inline int castd_opus_set_inband_fec(OpusEncoder *e, opus_int32 on) { return opus_encoder_ctl(e, OPUS_SET_INBAND_FEC(on)); }
static inline int castd_opus_set_packet_loss_perc(OpusEncoder *e, opus_int32 pct) { return opus_encoder_ctl(e, OPUS_SET_PACKET_LOSS_PERC(pct)); }
static inline int castd_opus_set_dtx(OpusEncoder *e, opus_int32 on) { return opus_encoder_ctl(e, OPUS_SET_DTX(on)); }
static inline int castd_opus_set_vbr(OpusEncoder *e, opus_int32 on) { return opus_encoder_ctl(e, OPUS_SET_VBR(on)); }
static inline int castd_opus_set_complexity(OpusEncoder *e, opus_int32 c) { return opus_encoder_ctl(e, OPUS_SET_COMPLEXITY(c)); }
static inline int castd_opus_set_signal(OpusEncoder *e, opus_int32 s) { return opus_encoder_ctl(e, OPUS_SET_SIGNAL(s)); }
static inline int castd_opus_get_lookahead(OpusEncoder *e, opus_int32 *samples) { return opus_encoder_ctl(e, OPUS_GET_LOOKAHEAD(samples)); }

static inline int castd_opus_application_audio(void) { return OPUS_APPLICATION_AUDIO; }
static inline int castd_opus_application_restricted_lowdelay(void) { return OPUS_APPLICATION_RESTRICTED_LOWDELAY; }
static inline int castd_opus_application_voip(void) { return OPUS_APPLICATION_VOIP; }
static inline int castd_opus_signal_music(void) { return OPUS_SIGNAL_MUSIC; }
static inline int castd_opus_auto(void) { return OPUS_AUTO; }
