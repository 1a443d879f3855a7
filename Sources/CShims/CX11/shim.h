// X11 + MIT-SHM + XFixes (cursor) + XDamage + RandR + Composite (window capture), as castd's X11 sources use them.
#pragma once
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <X11/extensions/XShm.h>
#include <X11/extensions/Xfixes.h>
#include <X11/extensions/Xdamage.h>
#include <X11/extensions/Xrandr.h>
#include <X11/extensions/Xcomposite.h>
#include <X11/Xatom.h>
#include <sys/ipc.h>
#include <sys/shm.h>

// Xlib macros Swift cannot import.
static inline int castd_x11_default_screen(Display *d) { return DefaultScreen(d); }
static inline Window castd_x11_root_window(Display *d, int s) { return RootWindow(d, s); }
static inline Visual *castd_x11_default_visual(Display *d, int s) { return DefaultVisual(d, s); }
static inline int castd_x11_default_depth(Display *d, int s) { return DefaultDepth(d, s); }
static inline int castd_x11_connection_number(Display *d) { return ConnectionNumber(d); }
static inline unsigned long castd_x11_all_planes(void) { return AllPlanes; }

// XDestroyImage is a macro calling the image's own destroy function (for an
// XShm image that frees the XImage but not the shared segment).
static inline int castd_x11_destroy_image(XImage *img) { return XDestroyImage(img); }
