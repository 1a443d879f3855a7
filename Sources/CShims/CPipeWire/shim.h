// libpipewire-0.3 and the SPA headers its streams need.
#pragma once
#include <pipewire/pipewire.h>
#include <spa/param/video/format-utils.h>
#include <spa/param/video/type-info.h>
#include <spa/buffer/meta.h>
#include <spa/debug/types.h>

// Function-like macros Swift cannot import.
static inline const char *castd_pw_headers_version(void) { return pw_get_headers_version(); }
