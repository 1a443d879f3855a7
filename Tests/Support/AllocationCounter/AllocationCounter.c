// Counts the heap allocations of each thread, for tests that pin down how many
// allocations a hot path makes (issue 19: the packet path). The test executable
// defines malloc and friends itself, so every allocation in the process (Swift's
// runtime, libsrtp, OpenSSL) comes here first (ELF symbol interposition: the
// executable's definition wins) and is handed on to glibc's own allocator through
// its exported __libc_* entry points: memory from either side may be freed by the
// other. The one cost is a thread-local increment per allocation.
//
// Linked into the one test executable SwiftPM builds on Linux, so it is active
// for every test target there; it changes no behaviour, only counts.
#include "AllocationCounter.h"

#include <errno.h>
#include <execinfo.h>
#include <stddef.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *pointer);

// initial-exec: the counter lives in the static TLS block, so reaching it never
// allocates (a dynamic TLS access could call malloc and recurse).
static __thread uint64_t allocations __attribute__((tls_model("initial-exec")));

uint64_t castd_allocations_on_this_thread(void) { return allocations; }

// Where allocations come from: the next `tracing` allocations of this thread each
// write their call stack to stderr (backtrace_symbols_fd allocates nothing; the
// first backtrace() may load libgcc and allocate, which `tracing_now` keeps from
// recursing). Off unless a benchmark asks for it.
static __thread int tracing __attribute__((tls_model("initial-exec")));
static __thread int tracing_now __attribute__((tls_model("initial-exec")));

void castd_trace_allocations_on_this_thread(int count) { tracing = count; }

static void trace(void) {
    if (tracing <= 0 || tracing_now) return;
    tracing_now = 1;
    tracing--;
    void *frames[24];
    int n = backtrace(frames, 24);
    backtrace_symbols_fd(frames, n, 2);
    (void)!write(2, "--\n", 3);
    tracing_now = 0;
}

void *malloc(size_t size) {
    allocations++;
    trace();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    allocations++;
    trace();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    allocations++;
    trace();
    return __libc_realloc(pointer, size);
}

void free(void *pointer) { __libc_free(pointer); }

static int is_power_of_two(size_t n) { return n != 0 && (n & (n - 1)) == 0; }

void *memalign(size_t alignment, size_t size) {
    allocations++;
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    if (!is_power_of_two(alignment)) {
        errno = EINVAL;
        return NULL;
    }
    allocations++;
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
    // POSIX: a power of two that is a multiple of sizeof(void *), else EINVAL.
    if (!is_power_of_two(alignment) || alignment % sizeof(void *) != 0) return EINVAL;
    allocations++;
    void *p = __libc_memalign(alignment, size);
    if (p == NULL) return ENOMEM;
    *out = p;
    return 0;
}
