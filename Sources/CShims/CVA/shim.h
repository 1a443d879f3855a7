// libva core + DRM display + the H.264 encode parameter buffers.
#pragma once
#include <va/va.h>
#include <va/va_drm.h>
#include <va/va_enc_h264.h>
