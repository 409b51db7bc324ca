// The power-cut harness's recorder: an LD_PRELOAD library that logs every operation the process
// makes under one directory tree (MENTORY_POWERCUT_ROOT) that decides what a disk holds after a
// power cut: file writes (with their data), truncations, fsync/fdatasync of files and of
// directories, file creations, mkdir, unlink, rename and link. PowerCutLog.swift reads the log and
// rebuilds the directory a disk would hold after a power cut at each sync.
//
// With MENTORY_POWERCUT_MODE=nosync, fsync and fdatasync of a file or directory under the root do
// nothing (logged as suppressed); with MENTORY_POWERCUT_MODE=nodirsync, only those of directories.
// These are the harness's negative controls, which must find losses.
//
// Built by the test with `cc -shared -fPIC` (PowerCutTests.swift); test-only, never linked into
// mentoryd. Every logged operation runs with one lock held, from the real call to the end of its
// record, so the log is one order in which the operations happened.
//
// Records, one header line each (fields separated by tabs), a write's data right after its header:
//   C ino path        a regular file created by open(O_CREAT)
//   O ino path        an existing regular file opened
//   W ino offset len  then len bytes: data written at offset
//   T ino size        ftruncate
//   S ino             fsync/fdatasync of a regular file
//   D path            fsync/fdatasync of a directory
//   N what            a sync suppressed by MENTORY_POWERCUT_MODE=nosync
//   M path            mkdir
//   U path            unlink (or rmdir)
//   R old new         rename
//   L old new         link
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FDS 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char root[PATH_MAX];
static size_t root_length;
static int log_fd = -1;
static int suppress_syncs;
static int suppress_directory_syncs;
// For each descriptor: the inode of a watched regular file (0: not watched), or the path of a
// watched directory. Written with `lock` held; read without it by the fast path, atomically.
static unsigned long long fd_inode[MAX_FDS];
static char *fd_directory[MAX_FDS];

static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_close)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off64_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_mkdir)(const char *, mode_t);
static int (*real_mkdirat)(int, const char *, mode_t);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_rmdir)(const char *);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_link)(const char *, const char *);

static void initialize(void) {
    real_open = dlsym(RTLD_NEXT, "open");
    real_openat = dlsym(RTLD_NEXT, "openat");
    real_close = dlsym(RTLD_NEXT, "close");
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
    real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_mkdir = dlsym(RTLD_NEXT, "mkdir");
    real_mkdirat = dlsym(RTLD_NEXT, "mkdirat");
    real_unlink = dlsym(RTLD_NEXT, "unlink");
    real_unlinkat = dlsym(RTLD_NEXT, "unlinkat");
    real_rmdir = dlsym(RTLD_NEXT, "rmdir");
    real_rename = dlsym(RTLD_NEXT, "rename");
    real_renameat = dlsym(RTLD_NEXT, "renameat");
    real_link = dlsym(RTLD_NEXT, "link");
    const char *configured_root = getenv("MENTORY_POWERCUT_ROOT");
    const char *log_path = getenv("MENTORY_POWERCUT_LOG");
    const char *mode = getenv("MENTORY_POWERCUT_MODE");
    suppress_syncs = mode != NULL && strcmp(mode, "nosync") == 0;
    suppress_directory_syncs = mode != NULL && strcmp(mode, "nodirsync") == 0;
    if (configured_root == NULL || log_path == NULL || realpath(configured_root, root) == NULL) {
        root_length = 0;
        return;
    }
    root_length = strlen(root);
    log_fd = (int)syscall(SYS_openat, AT_FDCWD, log_path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (log_fd < 0) root_length = 0;
}

static int active(void) {
    pthread_once(&once, initialize);
    return root_length > 0;
}

static int watched(const char *path) {
    return strncmp(path, root, root_length) == 0 && (path[root_length] == '\0' || path[root_length] == '/');
}

static void append(const void *bytes, size_t count) {
    const char *cursor = bytes;
    while (count > 0) {
        ssize_t written = syscall(SYS_write, log_fd, cursor, count);
        if (written < 0) {
            if (errno == EINTR) continue;
            abort();  // a gap in the log would make every later check meaningless
        }
        cursor += written;
        count -= (size_t)written;
    }
}

static void record(const char *format, ...) {
    char line[3 * PATH_MAX];
    va_list arguments;
    va_start(arguments, format);
    int length = vsnprintf(line, sizeof line, format, arguments);
    va_end(arguments);
    if (length < 0 || (size_t)length >= sizeof line) abort();
    append(line, (size_t)length);
}

// The absolute path of `path` relative to `directory` (AT_FDCWD or a descriptor), with its parent
// resolved (symbolic links, `..`); the last component is kept as it is. False when it cannot be.
static int resolve(int directory, const char *path, char *out) {
    char joined[PATH_MAX];
    if (path[0] == '/') {
        if (snprintf(joined, sizeof joined, "%s", path) >= (int)sizeof joined) return 0;
    } else {
        char base[PATH_MAX];
        if (directory == AT_FDCWD) {
            if (getcwd(base, sizeof base) == NULL) return 0;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", directory);
            ssize_t length = readlink(link, base, sizeof base - 1);
            if (length < 0) return 0;
            base[length] = '\0';
        }
        if (snprintf(joined, sizeof joined, "%s/%s", base, path) >= (int)sizeof joined) return 0;
    }
    size_t length = strlen(joined);
    while (length > 1 && joined[length - 1] == '/') joined[--length] = '\0';
    char *slash = strrchr(joined, '/');
    char parent[PATH_MAX];
    if (slash == joined) {
        strcpy(parent, "/");
    } else {
        *slash = '\0';
        if (realpath(joined, parent) == NULL) return 0;
        *slash = '/';
    }
    const char *name = slash + 1;
    if (snprintf(out, PATH_MAX, "%s%s%s", parent, strcmp(parent, "/") == 0 ? "" : "/", name) >= PATH_MAX) return 0;
    return 1;
}

// After a successful open of `fd`: remembers it when it is under the root, and logs a creation
// (or the opening of an existing file, and its truncation by O_TRUNC).
static void opened(int fd, int existed, int flags) {
    if (fd < 0 || fd >= MAX_FDS) return;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, path, sizeof path - 1);
    if (length < 0) return;
    path[length] = '\0';
    if (!watched(path)) return;
    struct stat info;
    if (fstat(fd, &info) != 0) return;
    if (S_ISDIR(info.st_mode)) {
        __atomic_store_n(&fd_directory[fd], strdup(path), __ATOMIC_RELEASE);
    } else if (S_ISREG(info.st_mode)) {
        record("%c\t%llu\t%s\n", existed ? 'O' : 'C', (unsigned long long)info.st_ino, path);
        if (existed && (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY) {
            record("T\t%llu\t0\n", (unsigned long long)info.st_ino);
        }
        __atomic_store_n(&fd_inode[fd], (unsigned long long)info.st_ino, __ATOMIC_RELEASE);
    }
}

static int open_common(int directory, const char *path, int flags, mode_t mode) {
    char resolved[PATH_MAX];
    if (!active() || !resolve(directory, path, resolved) || !watched(resolved)) {
        return real_openat(directory, path, flags, mode);
    }
    pthread_mutex_lock(&lock);
    struct stat before;
    int existed = fstatat(directory, path, &before, 0) == 0;
    int fd = real_openat(directory, path, flags, mode);
    int saved = errno;
    if (fd >= 0) opened(fd, existed, flags);
    pthread_mutex_unlock(&lock);
    errno = saved;
    return fd;
}

// Whether open's optional mode argument was passed (glibc's __OPEN_NEEDS_MODE).
static mode_t mode_argument(int flags, va_list arguments) {
    return ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? (mode_t)va_arg(arguments, int) : 0;
}

int open(const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    pthread_once(&once, initialize);
    return open_common(AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    pthread_once(&once, initialize);
    return open_common(AT_FDCWD, path, flags, mode);
}

int openat(int directory, const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    pthread_once(&once, initialize);
    return open_common(directory, path, flags, mode);
}

int openat64(int directory, const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = mode_argument(flags, arguments);
    va_end(arguments);
    pthread_once(&once, initialize);
    return open_common(directory, path, flags, mode);
}

int __open_2(const char *path, int flags) {
    pthread_once(&once, initialize);
    return open_common(AT_FDCWD, path, flags, 0);
}

int __open64_2(const char *path, int flags) {
    pthread_once(&once, initialize);
    return open_common(AT_FDCWD, path, flags, 0);
}

int close(int fd) {
    pthread_once(&once, initialize);
    if (fd < 0 || fd >= MAX_FDS
        || (__atomic_load_n(&fd_inode[fd], __ATOMIC_ACQUIRE) == 0
            && __atomic_load_n(&fd_directory[fd], __ATOMIC_ACQUIRE) == NULL)) {
        return real_close(fd);
    }
    pthread_mutex_lock(&lock);
    __atomic_store_n(&fd_inode[fd], 0, __ATOMIC_RELEASE);
    char *directory = __atomic_exchange_n(&fd_directory[fd], NULL, __ATOMIC_ACQ_REL);
    int result = real_close(fd);
    int saved = errno;
    pthread_mutex_unlock(&lock);
    free(directory);
    errno = saved;
    return result;
}

// The watched inode `fd` refers to, or 0. A descriptor closed behind the shim's back (and its
// number reused) no longer matches its inode, and is forgotten.
static unsigned long long inode_of(int fd) {
    if (fd < 0 || fd >= MAX_FDS) return 0;
    unsigned long long inode = __atomic_load_n(&fd_inode[fd], __ATOMIC_ACQUIRE);
    if (inode == 0) return 0;
    struct stat info;
    if (fstat(fd, &info) != 0 || (unsigned long long)info.st_ino != inode) {
        __atomic_compare_exchange_n(&fd_inode[fd], &inode, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        return 0;
    }
    return inode;
}

static void record_write(unsigned long long inode, long long offset, const void *bytes, ssize_t count) {
    if (count <= 0) return;
    record("W\t%llu\t%lld\t%lld\n", inode, offset, (long long)count);
    append(bytes, (size_t)count);
}

ssize_t pwrite(int fd, const void *bytes, size_t count, off_t offset) {
    pthread_once(&once, initialize);
    unsigned long long inode = inode_of(fd);
    if (inode == 0) return real_pwrite(fd, bytes, count, offset);
    pthread_mutex_lock(&lock);
    ssize_t written = real_pwrite(fd, bytes, count, offset);
    int saved = errno;
    record_write(inode, (long long)offset, bytes, written);
    pthread_mutex_unlock(&lock);
    errno = saved;
    return written;
}

ssize_t pwrite64(int fd, const void *bytes, size_t count, off64_t offset) {
    pthread_once(&once, initialize);
    unsigned long long inode = inode_of(fd);
    if (inode == 0) return real_pwrite64(fd, bytes, count, offset);
    pthread_mutex_lock(&lock);
    ssize_t written = real_pwrite64(fd, bytes, count, offset);
    int saved = errno;
    record_write(inode, (long long)offset, bytes, written);
    pthread_mutex_unlock(&lock);
    errno = saved;
    return written;
}

ssize_t write(int fd, const void *bytes, size_t count) {
    pthread_once(&once, initialize);
    unsigned long long inode = inode_of(fd);
    if (inode == 0) return real_write(fd, bytes, count);
    pthread_mutex_lock(&lock);
    off_t offset = (fcntl(fd, F_GETFL) & O_APPEND) ? lseek(fd, 0, SEEK_END) : lseek(fd, 0, SEEK_CUR);
    ssize_t written = real_write(fd, bytes, count);
    int saved = errno;
    record_write(inode, (long long)offset, bytes, written);
    pthread_mutex_unlock(&lock);
    errno = saved;
    return written;
}

ssize_t writev(int fd, const struct iovec *vectors, int count) {
    pthread_once(&once, initialize);
    unsigned long long inode = inode_of(fd);
    if (inode == 0) return real_writev(fd, vectors, count);
    pthread_mutex_lock(&lock);
    off_t offset = (fcntl(fd, F_GETFL) & O_APPEND) ? lseek(fd, 0, SEEK_END) : lseek(fd, 0, SEEK_CUR);
    ssize_t written = real_writev(fd, vectors, count);
    int saved = errno;
    ssize_t left = written;
    for (int index = 0; index < count && left > 0; index++) {
        ssize_t part = (ssize_t)vectors[index].iov_len < left ? (ssize_t)vectors[index].iov_len : left;
        record_write(inode, (long long)offset, vectors[index].iov_base, part);
        offset += part;
        left -= part;
    }
    pthread_mutex_unlock(&lock);
    errno = saved;
    return written;
}

static int truncate_common(int fd, long long size, int (*real)(int, long long)) {
    unsigned long long inode = inode_of(fd);
    if (inode == 0) return real(fd, size);
    pthread_mutex_lock(&lock);
    int result = real(fd, size);
    int saved = errno;
    if (result == 0) record("T\t%llu\t%lld\n", inode, size);
    pthread_mutex_unlock(&lock);
    errno = saved;
    return result;
}

static int call_ftruncate(int fd, long long size) { return real_ftruncate(fd, (off_t)size); }
static int call_ftruncate64(int fd, long long size) { return real_ftruncate64(fd, (off64_t)size); }

int ftruncate(int fd, off_t size) {
    pthread_once(&once, initialize);
    return truncate_common(fd, (long long)size, call_ftruncate);
}

int ftruncate64(int fd, off64_t size) {
    pthread_once(&once, initialize);
    return truncate_common(fd, (long long)size, call_ftruncate64);
}

static int sync_common(int fd, int (*real)(int)) {
    unsigned long long inode = inode_of(fd);
    char *directory = (fd >= 0 && fd < MAX_FDS) ? __atomic_load_n(&fd_directory[fd], __ATOMIC_ACQUIRE) : NULL;
    if (inode == 0 && directory == NULL) return real(fd);
    pthread_mutex_lock(&lock);
    int result = 0;
    int saved = 0;
    if (suppress_syncs || (suppress_directory_syncs && directory != NULL)) {
        if (inode != 0) record("N\t%llu\n", inode); else record("N\t%s\n", directory);
    } else {
        result = real(fd);
        saved = errno;
        if (result == 0) {
            if (inode != 0) record("S\t%llu\n", inode); else record("D\t%s\n", directory);
        }
    }
    pthread_mutex_unlock(&lock);
    errno = saved;
    return result;
}

int fsync(int fd) {
    pthread_once(&once, initialize);
    return sync_common(fd, real_fsync);
}

int fdatasync(int fd) {
    pthread_once(&once, initialize);
    return sync_common(fd, real_fdatasync);
}

// A path operation: resolves `path` first, runs `call` with the lock held, logs on success.
#define PATH_OPERATION(directory, path, call, ...)                                  \
    do {                                                                            \
        char resolved[PATH_MAX];                                                    \
        if (!active() || !resolve(directory, path, resolved) || !watched(resolved)) \
            return call;                                                            \
        pthread_mutex_lock(&lock);                                                  \
        int result = call;                                                          \
        int saved = errno;                                                          \
        if (result == 0) record(__VA_ARGS__);                                       \
        pthread_mutex_unlock(&lock);                                                \
        errno = saved;                                                              \
        return result;                                                              \
    } while (0)

int mkdir(const char *path, mode_t mode) {
    pthread_once(&once, initialize);
    PATH_OPERATION(AT_FDCWD, path, real_mkdir(path, mode), "M\t%s\n", resolved);
}

int mkdirat(int directory, const char *path, mode_t mode) {
    pthread_once(&once, initialize);
    PATH_OPERATION(directory, path, real_mkdirat(directory, path, mode), "M\t%s\n", resolved);
}

int unlink(const char *path) {
    pthread_once(&once, initialize);
    PATH_OPERATION(AT_FDCWD, path, real_unlink(path), "U\t%s\n", resolved);
}

int unlinkat(int directory, const char *path, int flags) {
    pthread_once(&once, initialize);
    PATH_OPERATION(directory, path, real_unlinkat(directory, path, flags), "U\t%s\n", resolved);
}

int rmdir(const char *path) {
    pthread_once(&once, initialize);
    PATH_OPERATION(AT_FDCWD, path, real_rmdir(path), "U\t%s\n", resolved);
}

static int two_path_operation(
    char kind, int old_directory, const char *old_path, int new_directory, const char *new_path, int (*call)(void *),
    void *context
) {
    char old_resolved[PATH_MAX], new_resolved[PATH_MAX];
    if (!active() || !resolve(old_directory, old_path, old_resolved) || !resolve(new_directory, new_path, new_resolved)
        || (!watched(old_resolved) && !watched(new_resolved))) {
        return call(context);
    }
    pthread_mutex_lock(&lock);
    int result = call(context);
    int saved = errno;
    if (result == 0) record("%c\t%s\t%s\n", kind, old_resolved, new_resolved);
    pthread_mutex_unlock(&lock);
    errno = saved;
    return result;
}

struct two_paths {
    int old_directory;
    const char *old_path;
    int new_directory;
    const char *new_path;
};

static int call_renameat(void *context) {
    struct two_paths *paths = context;
    return real_renameat(paths->old_directory, paths->old_path, paths->new_directory, paths->new_path);
}

static int call_link(void *context) {
    struct two_paths *paths = context;
    return real_link(paths->old_path, paths->new_path);
}

int rename(const char *old_path, const char *new_path) {
    pthread_once(&once, initialize);
    struct two_paths paths = {AT_FDCWD, old_path, AT_FDCWD, new_path};
    return two_path_operation('R', AT_FDCWD, old_path, AT_FDCWD, new_path, call_renameat, &paths);
}

int renameat(int old_directory, const char *old_path, int new_directory, const char *new_path) {
    pthread_once(&once, initialize);
    struct two_paths paths = {old_directory, old_path, new_directory, new_path};
    return two_path_operation('R', old_directory, old_path, new_directory, new_path, call_renameat, &paths);
}

int link(const char *old_path, const char *new_path) {
    pthread_once(&once, initialize);
    struct two_paths paths = {AT_FDCWD, old_path, AT_FDCWD, new_path};
    return two_path_operation('L', AT_FDCWD, old_path, AT_FDCWD, new_path, call_link, &paths);
}
