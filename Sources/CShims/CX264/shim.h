// libx264. x264.h needs <stdint.h> first.
#pragma once
#include <stdint.h>
#include <sys/prctl.h>
#include <x264.h>

// x264_encoder_open is a macro naming the build's ABI-versioned symbol.
static inline x264_t *castd_x264_encoder_open(x264_param_t *p) { return x264_encoder_open(p); }

// libx264 puts every buffer of 1.75 MiB or more on 2 MiB-aligned memory and
// asks for transparent huge pages there (madvise MADV_HUGEPAGE). Its
// bitstream and NAL buffers are sized for the worst case (width × height × 4
// at 1080p, 8 to 12 MiB each) and only their first kilobytes are ever
// written, yet one byte written faults in a whole 2 MiB page. This turns
// transparent huge pages off for the calling process (prctl is variadic, so
// Swift cannot call it directly). Returns 0 on success, -1 with errno.
static inline int castd_disable_transparent_huge_pages(void) { return prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0); }
