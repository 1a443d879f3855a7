// libx264. x264.h needs <stdint.h> first.
#pragma once
#include <stdint.h>
#include <x264.h>

// x264_encoder_open is a macro naming the build's ABI-versioned symbol.
static inline x264_t *castd_x264_encoder_open(x264_param_t *p) { return x264_encoder_open(p); }
