// The fault-injection harness's shim: an LD_PRELOAD library that makes writes, or syncs, of the
// database's files fail with an errno of the test's choosing, switched on and off while the process
// runs.
//
// MENTORY_FAULT_ROOT names a directory; the files it watches are those whose name, in that
// directory, starts with "mentoryd.sqlite" (the database, its -wal, -shm and -journal files).
// MENTORY_FAULT_CONTROL names a file of FAULT_CONTROL_SIZE bytes that the shim maps shared, so that
// the test switches faults by writing to it, without a signal or a restart. Its text (NUL- or
// newline-terminated) is one of:
//   none              no fault
//   write ERRNO       write, pwrite, pwrite64 and writev fail with ERRNO (ENOSPC, EIO)
//   sync ERRNO        fsync and fdatasync fail with ERRNO
// Every injected failure adds one to the count at byte FAULT_COUNT_OFFSET of the control file (a
// 64-bit integer in the machine's order), so the test knows that its faults were hit.
//
// Built by the test with `cc -shared -fPIC` (FaultInjectionTests.swift); test-only, never linked
// into mentoryd.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define FAULT_CONTROL_SIZE 64
#define FAULT_COUNT_OFFSET 56

enum target { TARGET_NONE, TARGET_WRITE, TARGET_SYNC };

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char root[PATH_MAX];
static size_t root_length;
static volatile char *control;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

static void initialize(void) {
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    const char *configured_root = getenv("MENTORY_FAULT_ROOT");
    const char *control_path = getenv("MENTORY_FAULT_CONTROL");
    if (configured_root == NULL || control_path == NULL || realpath(configured_root, root) == NULL) return;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, control_path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return;
    void *mapped = mmap(NULL, FAULT_CONTROL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    syscall(SYS_close, fd);
    if (mapped == MAP_FAILED) return;
    control = mapped;
    root_length = strlen(root);
}

// The fault the control file asks for now: its target, and the errno in `code`.
static enum target current_fault(int *code) {
    pthread_once(&once, initialize);
    if (control == NULL) return TARGET_NONE;
    char text[FAULT_COUNT_OFFSET];
    for (size_t index = 0; index < sizeof text; index++) text[index] = control[index];
    text[sizeof text - 1] = '\0';
    enum target target;
    const char *name;
    if (strncmp(text, "write ", 6) == 0) {
        target = TARGET_WRITE;
        name = text + 6;
    } else if (strncmp(text, "sync ", 5) == 0) {
        target = TARGET_SYNC;
        name = text + 5;
    } else {
        return TARGET_NONE;
    }
    if (strncmp(name, "ENOSPC", 6) == 0) {
        *code = ENOSPC;
    } else if (strncmp(name, "EIO", 3) == 0) {
        *code = EIO;
    } else if (strncmp(name, "EDQUOT", 6) == 0) {
        *code = EDQUOT;
    } else {
        return TARGET_NONE;
    }
    return target;
}

// Whether `fd` is one of the database's files under the root.
static int is_database_file(int fd) {
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, path, sizeof path - 1);
    if (length < 0) return 0;
    path[length] = '\0';
    if (strncmp(path, root, root_length) != 0 || path[root_length] != '/') return 0;
    const char *name = path + root_length + 1;
    return strchr(name, '/') == NULL && strncmp(name, "mentoryd.sqlite", 15) == 0;
}

// Whether a call of kind `kind` on `fd` fails now; sets errno and counts the failure when it does.
static int inject(enum target kind, int fd) {
    int saved = errno;
    int code = 0;
    if (current_fault(&code) != kind || !is_database_file(fd)) {
        errno = saved;
        return 0;
    }
    __atomic_add_fetch((unsigned long long *)(uintptr_t)(control + FAULT_COUNT_OFFSET), 1, __ATOMIC_SEQ_CST);
    errno = code;
    return 1;
}

ssize_t write(int fd, const void *bytes, size_t count) {
    if (inject(TARGET_WRITE, fd)) return -1;
    return real_write(fd, bytes, count);
}

ssize_t pwrite(int fd, const void *bytes, size_t count, off_t offset) {
    if (inject(TARGET_WRITE, fd)) return -1;
    return real_pwrite(fd, bytes, count, offset);
}

ssize_t pwrite64(int fd, const void *bytes, size_t count, off64_t offset) {
    if (inject(TARGET_WRITE, fd)) return -1;
    return real_pwrite64(fd, bytes, count, offset);
}

ssize_t writev(int fd, const struct iovec *vectors, int count) {
    if (inject(TARGET_WRITE, fd)) return -1;
    return real_writev(fd, vectors, count);
}

int fsync(int fd) {
    if (inject(TARGET_SYNC, fd)) return -1;
    return real_fsync(fd);
}

int fdatasync(int fd) {
    if (inject(TARGET_SYNC, fd)) return -1;
    return real_fdatasync(fd);
}
