// What x264 settings cost in memory, CPU and quality at 1080p (issue 19; the
// "x264's pictures, setting by setting" table in docs/lab-notes/2026-12-02-memory.md). castd's X264Encoder settings, then
// any x264_param_parse overrides (ref, subme, threads, ...). Content: the bench's busy
// field (random 8x8 blocks scrolled by (9,5) px a frame), or with SMOOTH=1 a sine pattern
// moving by fractions of a pixel. Prints one JSON line: anonymous memory x264 added,
// encode time, CPU per frame, luma PSNR of x264's reconstruction, bitrate.
//
//   cc -O2 -o /tmp/x264_memory IntegrationTests/castkit/bench/x264_memory.c -lx264 -lm
//   /tmp/x264_memory 40 subme=0          # SMOOTH=1 /tmp/x264_memory 40 ref=2
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <time.h>
#include <sys/prctl.h>
#include <x264.h>
#include <math.h>

static long rss_anon_kib(void) {
    FILE *f = fopen("/proc/self/status", "r"); char line[256]; long v = -1;
    while (f && fgets(line, sizeof line, f)) if (!strncmp(line, "RssAnon:", 8)) v = atol(line + 8);
    if (f) fclose(f);
    return v;
}
static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }

int main(int argc, char **argv) {
    int smooth = getenv("SMOOTH") != NULL, frames = argc > 1 ? atoi(argv[1]) : 90, W = 1920, H = 1080, FW = W + 512, FH = H + 512;
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    uint8_t *field[3]; uint32_t r = 0x12345678;
    for (int p = 0; p < 3; p++) field[p] = malloc((size_t)FW * FH);
    int bw = FW / 8 + 1;
    uint8_t *blocks = malloc((size_t)bw * (FH / 8 + 1) * 3);
    for (int i = 0; i < bw * (FH / 8 + 1) * 3; i++) { r ^= r << 13; r ^= r >> 17; r ^= r << 5; blocks[i] = r; }
    for (int p = 0; p < 3; p++) for (int y = 0; y < FH; y++) for (int x = 0; x < FW; x++)
        field[p][(size_t)y * FW + x] = p == 0 ? 16 + blocks[((y / 8) * bw + x / 8) * 3] % 220 : 16 + blocks[((y / 8) * bw + x / 8) * 3 + p] % 224;
    x264_picture_t pic; x264_picture_alloc(&pic, X264_CSP_I420, W, H);
    long base = rss_anon_kib(); struct mallinfo2 m0 = mallinfo2();

    x264_param_t p;
    x264_param_default_preset(&p, "superfast", "zerolatency");
    p.i_log_level = X264_LOG_ERROR; p.i_csp = X264_CSP_I420; p.i_width = W; p.i_height = H;
    p.i_fps_num = 30; p.i_fps_den = 1; p.i_timebase_num = 1; p.i_timebase_den = 30; p.b_vfr_input = 0;
    p.i_bframe = 0; p.rc.i_lookahead = 0; p.i_sync_lookahead = 0; p.b_sliced_threads = 1; p.i_threads = 2; p.i_slice_count = 2;
    p.i_keyint_max = X264_KEYINT_MAX_INFINITE; p.i_scenecut_threshold = 0; p.b_intra_refresh = 0;
    p.b_repeat_headers = 1; p.b_annexb = 1; p.i_level_idc = 40;
    p.rc.i_rc_method = X264_RC_ABR; p.rc.i_bitrate = 4000; p.rc.i_vbv_max_bitrate = 4000; p.rc.i_vbv_buffer_size = 4000 / 30;
    p.b_full_recon = 1;
    for (int i = 2; i < argc; i++) {
        char *eq = strchr(argv[i], '='); if (!eq) return 2; *eq = 0;
        if (x264_param_parse(&p, argv[i], eq + 1)) { fprintf(stderr, "bad param %s\n", argv[i]); return 2; }
        if (!strcmp(argv[i], "threads")) p.i_slice_count = p.i_threads;
        *eq = '=';
    }
    if (x264_param_apply_profile(&p, "baseline")) return 3;
    x264_t *h = x264_encoder_open(&p); if (!h) return 4;
    long opened = rss_anon_kib();
    double *ms = malloc(sizeof(double) * frames), psnr = 0, cpu0 = clock() / (double)CLOCKS_PER_SEC; long bytes = 0;
    for (int n = 0; n < frames; n++) {
        int dx = (n * 9) % 512, dy = (n * 5) % 512;
        if (smooth) {   // sub-pixel motion: a sine pattern moving by (2.37, 1.61) px a frame, plus scaled-looking detail
            static float sx[1920], cy[1080], sx2[1920], cy2[1080];
            for (int x = 0; x < W; x++) { sx[x] = sinf(0.05f * (x - 2.37f * n)); sx2[x] = sinf(0.31f * (x - 2.37f * n)); }
            for (int y = 0; y < H; y++) { cy[y] = cosf(0.041f * (y + 1.61f * n)); cy2[y] = cosf(0.27f * (y + 1.61f * n)); }
            for (int y = 0; y < H; y++) { uint8_t *row = pic.img.plane[0] + (size_t)y * pic.img.i_stride[0];
                for (int x = 0; x < W; x++) row[x] = (uint8_t)(126 + 70 * sx[x] * cy[y] + 25 * sx2[x] * cy2[y]); }
            for (int pl = 1; pl < 3; pl++) for (int y = 0; y < H / 2; y++) { uint8_t *row = pic.img.plane[pl] + (size_t)y * pic.img.i_stride[pl];
                for (int x = 0; x < W / 2; x++) row[x] = (uint8_t)(128 + (pl == 1 ? 40 : -40) * sx[2 * x] * cy[2 * y]); }
        } else
        for (int pl = 0; pl < 3; pl++) {
            int w = pl ? W / 2 : W, hh = pl ? H / 2 : H, ox = pl ? dx / 2 : dx, oy = pl ? dy / 2 : dy;
            for (int y = 0; y < hh; y++) memcpy(pic.img.plane[pl] + (size_t)y * pic.img.i_stride[pl], field[pl] + (size_t)(y + oy) * FW + ox, w);
        }
        pic.i_pts = n; x264_nal_t *nals; int nn; x264_picture_t out;
        double t0 = now_ms();
        int sz = x264_encoder_encode(h, &nals, &nn, &pic, &out);
        ms[n] = now_ms() - t0; bytes += sz;
        if (n >= 10 && sz > 0) {   // luma PSNR of x264's reconstruction (what a decoder shows)
            double se = 0;
            for (int y = 0; y < H; y++) { const uint8_t *a = pic.img.plane[0] + (size_t)y * pic.img.i_stride[0], *b = out.img.plane[0] + (size_t)y * out.img.i_stride[0];
                for (int x = 0; x < W; x++) { int d = a[x] - b[x]; se += d * d; } }
            double mse = se / ((double)W * H); psnr += mse > 0 ? 10 * log10(255.0 * 255.0 / mse) : 99;
        }
    }
    double cpu = clock() / (double)CLOCKS_PER_SEC - cpu0;
    long encoded = rss_anon_kib(); struct mallinfo2 m1 = mallinfo2();
    qsort(ms, frames, sizeof(double), cmp);
    printf("{\"args\":\"");
    for (int i = 2; i < argc; i++) printf("%s%s", i > 2 ? " " : "", argv[i]);
    printf("\",\"rss_anon_open_mib\":%.1f,\"rss_anon_encoding_mib\":%.1f,\"malloc_in_use_mib\":%.1f,"
           "\"encode_p50_ms\":%.2f,\"encode_p95_ms\":%.2f,\"cpu_ms_per_frame\":%.2f,\"luma_psnr_db\":%.2f,\"kbps\":%ld}\n",
           (opened - base) / 1024.0, (encoded - base) / 1024.0, (double)((m1.uordblks + m1.hblkhd) - (m0.uordblks + m0.hblkhd)) / 1048576.0,
           ms[frames / 2], ms[frames * 95 / 100], cpu * 1000 / frames, psnr / (frames - 10), bytes * 8L * 30 / frames / 1000);
    x264_encoder_close(h);
    return 0;
}
