#ifndef CASTD_ALLOCATION_COUNTER_H
#define CASTD_ALLOCATION_COUNTER_H
#include <stdint.h>

/// Heap allocations (malloc, calloc, realloc, aligned_alloc, posix_memalign,
/// memalign) made by the calling thread since it started. Tests take the
/// difference around the code they measure; other threads (parallel tests)
/// do not disturb the figure.
uint64_t castd_allocations_on_this_thread(void);

/// The calling thread's next `count` allocations (malloc, calloc, realloc) each print
/// their call stack to stderr, for finding where a hot path allocates.
void castd_trace_allocations_on_this_thread(int count);

#endif
