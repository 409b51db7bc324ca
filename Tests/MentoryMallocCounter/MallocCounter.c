// Counts heap allocations per thread, for the allocation guard (Tests/MentoryAllocationGuard).
//
// The definitions of malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign and valloc
// here interpose glibc's for the whole test process (an executable's symbols come first). Each forwards
// to glibc's own entry points (__libc_malloc and the rest), so no dlsym is needed and nothing recurses;
// when the calling thread is not counting, the cost is one thread-local load and a branch.
//
// Counting is per thread because the test process runs every suite in parallel: a thread counts only
// between mentory_malloc_counter_begin and mentory_malloc_counter_end, which the guard calls around
// synchronous work on one event-loop thread.
//
// ThreadSanitizer and AddressSanitizer intercept malloc themselves; under them nothing is interposed
// and mentory_malloc_counter_is_available() is false, and the guard refuses to run.

#include "MentoryMallocCounter.h"

#include <stdlib.h>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define MENTORY_MALLOC_COUNTER_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define MENTORY_MALLOC_COUNTER_SANITIZED 1
#endif

#if defined(__linux__) && defined(__GLIBC__) && !defined(MENTORY_MALLOC_COUNTER_SANITIZED)
#define MENTORY_MALLOC_COUNTER_HOOKED 1
#endif

#if MENTORY_MALLOC_COUNTER_HOOKED

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

// glibc's allocator, under the names it exports for exactly this purpose.
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void __libc_free(void *pointer);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void *__libc_valloc(size_t size);

typedef struct {
    bool counting;
    mentory_malloc_counts counts;
} thread_counter;

// initial-exec: reaching the variable never allocates (a dynamic TLS block would, from inside malloc).
static __thread thread_counter current __attribute__((tls_model("initial-exec")));
static _Atomic int64_t total_allocations = 0;

static inline void count_allocation(size_t size) {
    if (__builtin_expect(!current.counting, 1)) return;
    current.counts.allocations += 1;
    current.counts.bytes += (int64_t)size;
    atomic_fetch_add_explicit(&total_allocations, 1, memory_order_relaxed);
}

static inline void count_free(void *pointer) {
    if (__builtin_expect(!current.counting, 1) || pointer == NULL) return;
    current.counts.frees += 1;
}

void *malloc(size_t size) {
    count_allocation(size);
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    count_allocation(count * size);
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    if (pointer == NULL) {
        count_allocation(size);
    } else if (size == 0) {
        count_free(pointer);
    } else {
        // As swift-nio's allocation counter does: a resize counts as a free and an allocation.
        count_free(pointer);
        count_allocation(size);
    }
    return __libc_realloc(pointer, size);
}

void free(void *pointer) {
    count_free(pointer);
    __libc_free(pointer);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
    count_allocation(size);
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL && size != 0) return ENOMEM;
    *result = pointer;
    return 0;
}

void *aligned_alloc(size_t alignment, size_t size) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    count_allocation(size);
    return __libc_memalign(alignment, size);
}

void *memalign(size_t alignment, size_t size) {
    count_allocation(size);
    return __libc_memalign(alignment, size);
}

void *valloc(size_t size) {
    count_allocation(size);
    return __libc_valloc(size);
}

bool mentory_malloc_counter_is_available(void) { return true; }

void mentory_malloc_counter_begin(void) {
    current.counts = (mentory_malloc_counts){0, 0, 0};
    current.counting = true;
}

mentory_malloc_counts mentory_malloc_counter_end(void) {
    current.counting = false;
    return current.counts;
}

int64_t mentory_malloc_counter_total(void) { return atomic_load_explicit(&total_allocations, memory_order_relaxed); }

#else

// Sanitized (or not glibc): the allocator is left alone and nothing is counted.

bool mentory_malloc_counter_is_available(void) { return false; }

void mentory_malloc_counter_begin(void) {}

mentory_malloc_counts mentory_malloc_counter_end(void) { return (mentory_malloc_counts){0, 0, 0}; }

int64_t mentory_malloc_counter_total(void) { return 0; }

#endif

int mentory_malloc_counter_exercise(void) {
    // Through volatile pointers, so that an optimizing compiler keeps each allocation and free.
    for (int i = 0; i < 100; i++) {
        void *volatile block = malloc(64);
        free(block);
    }
    void *volatile zeroed = calloc(4, 8);
    void *volatile grown = realloc(zeroed, 1000);
    void *aligned = NULL;
    int result = posix_memalign(&aligned, 64, 128);
    void *volatile kept = aligned;
    free(grown);
    free(kept);
    return result;
}
