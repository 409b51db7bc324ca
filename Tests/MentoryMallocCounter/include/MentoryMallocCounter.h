#ifndef MENTORY_MALLOC_COUNTER_H
#define MENTORY_MALLOC_COUNTER_H

#include <stdbool.h>
#include <stdint.h>

/// What one thread allocated between `mentory_malloc_counter_begin` and `mentory_malloc_counter_end`.
typedef struct {
    /// Calls that returned new memory: malloc, calloc, realloc (a move or a new block), posix_memalign,
    /// aligned_alloc, memalign, valloc.
    int64_t allocations;
    /// Calls to free with a non-null pointer, and reallocs that released their old block.
    int64_t frees;
    /// Bytes requested by the counted allocations.
    int64_t bytes;
} mentory_malloc_counts;

/// Whether the allocator is interposed in this build: false under ThreadSanitizer and AddressSanitizer,
/// whose runtimes intercept malloc themselves; counting then reports nothing.
bool mentory_malloc_counter_is_available(void);

/// Starts counting the calling thread's allocations from zero. Other threads are never counted.
void mentory_malloc_counter_begin(void);

/// Stops counting on the calling thread and returns what it counted since `mentory_malloc_counter_begin`.
mentory_malloc_counts mentory_malloc_counter_end(void);

/// Allocations counted on every thread since the process started (a sanity check: it only grows).
int64_t mentory_malloc_counter_total(void);

/// Makes exactly 100 malloc(64) and free pairs, a calloc(4, 8), its realloc to 1000 bytes, a
/// posix_memalign(64, 128) and the two frees, on the calling thread, in a way no optimizer removes: what the
/// guard's self-check counts. Returns posix_memalign's result.
int mentory_malloc_counter_exercise(void);

#endif
