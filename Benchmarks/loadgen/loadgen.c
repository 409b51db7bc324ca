/*
 * loadgen - one C load generator for the raw echo server, redis-server and mentoryd,
 * all on Unix stream sockets. Modelled on redis-benchmark: one thread, epoll, every
 * connection sends a batch of `pipeline` requests and then reads that many responses
 * before it sends the next batch ("send N, read N"). Request bytes are built once and
 * reused; responses are parsed only enough to count them (length-prefixed frames for
 * mentoryd and raw, `+PONG\r\n` lines for Redis).
 *
 *   loadgen run  --proto raw|redis|mentory --socket PATH [--clients 1] [--pipeline 1]
 *                [--seconds 2] [--warmup 0.5]
 *       Prints one line: requests/s and batch round-trip p50/p99 in microseconds
 *       (with pipeline 1 a batch round trip is a request round trip).
 *   loadgen idle --proto raw|redis|mentory --socket PATH --connections N
 *       Opens N connections and handshakes each (mentoryd: Hello/Welcome; Redis: PING;
 *       raw: one echoed frame), prints "ready N", then holds them until stdin closes.
 *   loadgen fill --socket PATH --entries N
 *       Adds N diary entries on distinct days to mentoryd, 64 pipelined at a time.
 *
 * Not a test: it asserts nothing, but it reports error responses it counted.
 */
#define _GNU_SOURCE
#include "net.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Opens a connection and does what a client must before its first request. */
static int open_handshaken(const char *path, enum protocol proto, const struct buf *handshake,
                           struct buf *in)
{
    int fd = connect_unix(path);
    write_all(fd, handshake->data, handshake->len);
    /* mentoryd answers Hello with a Welcome frame; raw echoes; Redis answers PING. */
    read_responses(fd, proto, 1, in);
    return fd;
}

/* The bytes a connection sends first: Hello for mentoryd, otherwise one request. */
static void build_handshake(struct buf *out, enum protocol proto)
{
    if (proto == PROTO_MENTORY)
        put_hello_frame(out, "loadgen");
    else
        put_requests(out, proto, 1, 1);
}

/* ------------------------------------------------------------------------- */
/* run: throughput and latency                                                */

/* Batch round-trip times in nanoseconds, measured inside the window. */
struct samples {
    uint64_t *values;
    size_t len, cap;
};

static void add_sample(struct samples *s, uint64_t value)
{
    if (s->len == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 65536;
        s->values = realloc(s->values, s->cap * sizeof *s->values);
        if (s->values == NULL)
            die("realloc");
    }
    s->values[s->len++] = value;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The sample at `fraction` of the sorted samples (nearest rank), in microseconds. */
static double percentile_us(const struct samples *s, double fraction)
{
    if (s->len == 0)
        return 0;
    size_t index = (size_t)(fraction * (double)(s->len - 1) + 0.5);
    return (double)s->values[index] / 1000.0;
}

/* One connection of the run. */
struct conn {
    int fd;
    size_t sent;       /* bytes of the current batch written so far */
    unsigned received; /* responses of the current batch read so far */
    uint64_t started;  /* when the current batch's first byte was written */
    struct buf in;     /* a partial response carried to the next read */
};

struct run {
    enum protocol proto;
    unsigned pipeline;
    struct buf batch; /* the `pipeline` requests, sent again and again */
    uint64_t window_start, window_end;
    uint64_t completed; /* requests answered inside the window */
    unsigned errors;
    struct samples latency;
    int epoll;
};

/* Writes what is left of the batch; returns 1 when all of it is out. */
static int send_batch(struct run *r, struct conn *c)
{
    while (c->sent < r->batch.len) {
        ssize_t n = write(c->fd, r->batch.data + c->sent, r->batch.len - c->sent);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            die("write");
        }
        c->sent += (size_t)n;
    }
    return 1;
}

static void start_batch(struct run *r, struct conn *c)
{
    c->sent = 0;
    c->received = 0;
    c->started = now_ns();
    if (!send_batch(r, c)) {
        struct epoll_event event = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
        if (epoll_ctl(r->epoll, EPOLL_CTL_MOD, c->fd, &event) < 0)
            die("epoll_ctl");
    }
}

/* Counts a finished batch, if it finished inside the window. */
static void finish_batch(struct run *r, struct conn *c, uint64_t now)
{
    if (c->started >= r->window_start && now <= r->window_end) {
        r->completed += r->pipeline;
        add_sample(&r->latency, now - c->started);
    }
}

/* Reads what the socket has; returns 1 when the batch is complete. */
static int receive(struct run *r, struct conn *c)
{
    for (;;) {
        buf_reserve(&c->in, 4096);
        ssize_t n = read(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            die("read");
        }
        if (n == 0) {
            fprintf(stderr, "server closed the connection\n");
            exit(1);
        }
        c->in.len += (size_t)n;
        size_t used = count_responses(r->proto, c->in.data, c->in.len, &c->received, &r->errors);
        memmove(c->in.data, c->in.data + used, c->in.len - used);
        c->in.len -= used;
        if (c->received >= r->pipeline)
            return 1;
    }
}

static void run_epoll(struct run *r, struct conn *conns, unsigned clients)
{
    r->epoll = epoll_create1(EPOLL_CLOEXEC);
    if (r->epoll < 0)
        die("epoll_create1");
    for (unsigned i = 0; i < clients; i++) {
        if (fcntl(conns[i].fd, F_SETFL, O_NONBLOCK) < 0)
            die("fcntl");
        struct epoll_event event = {.events = EPOLLIN, .data.ptr = &conns[i]};
        if (epoll_ctl(r->epoll, EPOLL_CTL_ADD, conns[i].fd, &event) < 0)
            die("epoll_ctl");
    }
    for (unsigned i = 0; i < clients; i++)
        start_batch(r, &conns[i]);

    struct epoll_event events[256];
    for (;;) {
        int ready = epoll_wait(r->epoll, events, 256, 100);
        if (ready < 0 && errno != EINTR)
            die("epoll_wait");
        uint64_t now = now_ns();
        if (now > r->window_end)
            return;
        for (int i = 0; i < ready; i++) {
            struct conn *c = events[i].data.ptr;
            if (events[i].events & EPOLLOUT) {
                if (!send_batch(r, c))
                    continue;
                struct epoll_event event = {.events = EPOLLIN, .data.ptr = c};
                if (epoll_ctl(r->epoll, EPOLL_CTL_MOD, c->fd, &event) < 0)
                    die("epoll_ctl");
            }
            if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && receive(r, c)) {
                finish_batch(r, c, now_ns());
                start_batch(r, c);
            }
        }
    }
}

/* One connection needs no epoll: write the batch, block until it is answered. */
static void run_blocking(struct run *r, struct conn *c)
{
    for (;;) {
        uint64_t started = now_ns();
        if (started > r->window_end)
            return;
        c->started = started;
        write_all(c->fd, r->batch.data, r->batch.len);
        r->errors += read_responses(c->fd, r->proto, r->pipeline, &c->in);
        finish_batch(r, c, now_ns());
    }
}

static int command_run(enum protocol proto, const char *path, unsigned clients, unsigned pipeline,
                       double seconds, double warmup)
{
    struct run r = {.proto = proto, .pipeline = pipeline};
    put_requests(&r.batch, proto, pipeline, 1);
    struct buf handshake = {0};
    build_handshake(&handshake, proto);

    struct conn *conns = calloc(clients, sizeof *conns);
    if (conns == NULL)
        die("calloc");
    for (unsigned i = 0; i < clients; i++)
        conns[i].fd = open_handshaken(path, proto, &handshake, &conns[i].in);

    uint64_t start = now_ns();
    r.window_start = start + (uint64_t)(warmup * 1e9);
    r.window_end = r.window_start + (uint64_t)(seconds * 1e9);
    if (clients == 1)
        run_blocking(&r, &conns[0]);
    else
        run_epoll(&r, conns, clients);

    qsort(r.latency.values, r.latency.len, sizeof *r.latency.values, compare_u64);
    static const char *names[] = {"raw", "redis", "mentory"};
    printf("proto=%s clients=%u pipeline=%u requests=%llu seconds=%.3f rps=%.0f p50_us=%.2f p99_us=%.2f "
           "errors=%u\n",
           names[proto], clients, pipeline, (unsigned long long)r.completed, seconds,
           (double)r.completed / seconds, percentile_us(&r.latency, 0.50), percentile_us(&r.latency, 0.99),
           r.errors);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* idle and fill                                                              */

static int command_idle(enum protocol proto, const char *path, unsigned connections)
{
    struct buf handshake = {0}, in = {0};
    build_handshake(&handshake, proto);
    for (unsigned i = 0; i < connections; i++) {
        open_handshaken(path, proto, &handshake, &in); /* kept open until exit */
        in.len = 0;
    }
    printf("ready %u\n", connections);
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin) != NULL) {
    }
    return 0;
}

static int command_fill(const char *path, unsigned entries)
{
    enum { WINDOW = 64 };
    struct buf handshake = {0}, in = {0}, batch = {0};
    build_handshake(&handshake, PROTO_MENTORY);
    int fd = open_handshaken(path, PROTO_MENTORY, &handshake, &in);
    unsigned errors = 0;
    for (unsigned next = 0; next < entries;) {
        unsigned count = entries - next < WINDOW ? entries - next : WINDOW;
        batch.len = 0;
        for (unsigned i = 0; i < count; i++)
            put_diary_add_frame(&batch, i + 1, next + i);
        write_all(fd, batch.data, batch.len);
        errors += read_responses(fd, PROTO_MENTORY, count, &in);
        next += count;
    }
    printf("added %u diary entries, %u errors\n", entries - errors, errors);
    return errors == 0 ? 0 : 1;
}

/* ------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: loadgen run  --proto raw|redis|mentory --socket PATH [--clients N] [--pipeline N]\n"
            "                    [--seconds S] [--warmup S]\n"
            "       loadgen idle --proto raw|redis|mentory --socket PATH --connections N\n"
            "       loadgen fill --socket PATH --entries N\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    const char *command = argv[1], *path = NULL;
    enum protocol proto = PROTO_MENTORY;
    unsigned clients = 1, pipeline = 1, count = 0;
    double seconds = 2, warmup = 0.5;
    for (int i = 2; i < argc; i++) {
        const char *flag = argv[i];
        if (i + 1 >= argc)
            usage();
        const char *value = argv[++i];
        if (strcmp(flag, "--proto") == 0) {
            if (strcmp(value, "raw") == 0)
                proto = PROTO_RAW;
            else if (strcmp(value, "redis") == 0)
                proto = PROTO_REDIS;
            else if (strcmp(value, "mentory") == 0)
                proto = PROTO_MENTORY;
            else
                usage();
        } else if (strcmp(flag, "--socket") == 0) {
            path = value;
        } else if (strcmp(flag, "--clients") == 0) {
            clients = (unsigned)strtoul(value, NULL, 10);
        } else if (strcmp(flag, "--pipeline") == 0) {
            pipeline = (unsigned)strtoul(value, NULL, 10);
        } else if (strcmp(flag, "--connections") == 0 || strcmp(flag, "--entries") == 0) {
            count = (unsigned)strtoul(value, NULL, 10);
        } else if (strcmp(flag, "--seconds") == 0) {
            seconds = strtod(value, NULL);
        } else if (strcmp(flag, "--warmup") == 0) {
            warmup = strtod(value, NULL);
        } else {
            usage();
        }
    }
    if (path == NULL || clients == 0 || pipeline == 0 || seconds <= 0)
        usage();
    raise_fd_limit();
    signal(SIGPIPE, SIG_IGN); /* a server that goes away gives EPIPE and a message */
    if (strcmp(command, "run") == 0)
        return command_run(proto, path, clients, pipeline, seconds, warmup);
    if (strcmp(command, "idle") == 0 && count > 0)
        return command_idle(proto, path, count);
    if (strcmp(command, "fill") == 0 && count > 0)
        return command_fill(path, count);
    usage();
    return 2;
}
