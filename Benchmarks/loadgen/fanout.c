/*
 * fanout - fan-out throughput of mentoryd beside redis-server pub/sub, from one C thread.
 *
 *   fanout --proto redis|mentory --socket PATH --subscribers N [--events E] [--window 32]
 *
 * N subscriber connections subscribe (mentoryd: Hello, then session.subscribe to the
 * `mentor` topic; Redis: SUBSCRIBE ch). One publisher connection then publishes E changes
 * (mentoryd: mentor.set with a fresh content each time; Redis: PUBLISH ch), keeping at most
 * `window` unanswered, while the same epoll loop reads every subscriber. It prints one line:
 *
 *   subscribers=N proto=P events=E delivered=D seconds=S events_per_s=R
 *
 * where R counts changes delivered to subscribers per second, from the first publish to the
 * last delivery. Deliveries are parsed only enough to count them: for mentoryd, frames that
 * are an Event of kind CHANGE; for Redis, `message` pushes. Modelled on redis-benchmark and
 * written in C so that the load generator costs less than either server; the Swift
 * mentory-fanout-bench also measures change-to-delivery latency.
 *
 * Not a test: it asserts nothing. It exits 1 if the deliveries stop short (a subscriber that
 * was reset or dropped), after `--timeout` seconds without progress (default 30).
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

static void set_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        die("fcntl");
}

/* ------------------------------------------------------------------------- */
/* Parsing just enough to count deliveries. */

/* Skips one field of wire type `type` at *p; 0 when it is cut short or unsupported. */
static int skip_field(const uint8_t **p, const uint8_t *end, unsigned type)
{
    uint64_t value;
    switch (type) {
    case 0:
        return wire_get_varint(p, end, &value);
    case 1:
        if (end - *p < 8)
            return 0;
        *p += 8;
        return 1;
    case 2:
        if (!wire_get_varint(p, end, &value) || value > (uint64_t)(end - *p))
            return 0;
        *p += value;
        return 1;
    case 5:
        if (end - *p < 4)
            return 0;
        *p += 4;
        return 1;
    default:
        return 0;
    }
}

enum mentory_frame { FRAME_OTHER, FRAME_RESPONSE, FRAME_CHANGE };

/* What an Envelope payload is: a Response (field 4), an Event of kind CHANGE (field 5 with
 * Event.kind, field 3, absent or 0), or something else. */
static enum mentory_frame classify(const uint8_t *payload, size_t len)
{
    const uint8_t *p = payload, *end = payload + len;
    uint64_t key, length;
    if (!wire_get_varint(&p, end, &key) || (key & 7) != 2 || !wire_get_varint(&p, end, &length) ||
        length > (uint64_t)(end - p))
        return FRAME_OTHER;
    if (key >> 3 == 4)
        return FRAME_RESPONSE;
    if (key >> 3 != 5)
        return FRAME_OTHER;
    end = p + length; /* the Event message */
    uint64_t kind = 0;
    while (p < end) {
        if (!wire_get_varint(&p, end, &key))
            return FRAME_OTHER;
        if (key == (3u << 3 | 0)) {
            if (!wire_get_varint(&p, end, &kind))
                return FRAME_OTHER;
        } else if (!skip_field(&p, end, (unsigned)(key & 7))) {
            return FRAME_OTHER;
        }
    }
    return kind == 0 ? FRAME_CHANGE : FRAME_OTHER;
}

/* One RESP value at data[*used..len): 1 when whole (then *used moves past it), 0 when cut
 * short. `first` receives the first bulk string of an array (or the simple value itself). */
static int resp_value(const uint8_t *data, size_t len, size_t *used, const uint8_t **first, size_t *first_len)
{
    size_t at = *used;
    const uint8_t *newline = memchr(data + at, '\n', len - at);
    if (newline == NULL || at >= len)
        return 0;
    uint8_t type = data[at];
    long number = strtol((const char *)data + at + 1, NULL, 10);
    at = (size_t)(newline - data) + 1;
    if (type == '*') {
        for (long i = 0; i < number; i++) {
            const uint8_t *element = NULL;
            size_t element_len = 0;
            if (!resp_value(data, len, &at, &element, &element_len))
                return 0;
            if (i == 0 && first != NULL) {
                *first = element;
                *first_len = element_len;
            }
        }
    } else if (type == '$' && number >= 0) {
        if (len - at < (size_t)number + 2)
            return 0;
        if (first != NULL) {
            *first = data + at;
            *first_len = (size_t)number;
        }
        at += (size_t)number + 2;
    } else if (first != NULL) {
        *first = data + *used + 1;
        *first_len = (size_t)(newline - data) - *used - 1;
    }
    *used = at;
    return 1;
}

/* ------------------------------------------------------------------------- */

struct subscriber {
    int fd;
    int subscribed; /* the subscription was confirmed */
    uint64_t delivered;
    struct buf in;
};

/* Reads what `s` has and counts it; returns 0 at end of file or error. */
static int drain(enum protocol proto, struct subscriber *s, uint64_t *changes, uint64_t *last)
{
    for (;;) {
        buf_reserve(&s->in, 65536);
        ssize_t n = read(s->fd, s->in.data + s->in.len, s->in.cap - s->in.len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0)
            return 0;
        s->in.len += (size_t)n;
        size_t used = 0;
        uint64_t before = s->delivered;
        if (proto == PROTO_REDIS) {
            const uint8_t *first = NULL;
            size_t first_len = 0;
            while (resp_value(s->in.data, s->in.len, &used, &first, &first_len)) {
                if (first_len == 7 && memcmp(first, "message", 7) == 0)
                    s->delivered++;
                else if (first_len == 9 && memcmp(first, "subscribe", 9) == 0)
                    s->subscribed = 1;
            }
        } else {
            while (s->in.len - used >= 4) {
                const uint8_t *frame = s->in.data + used;
                size_t length = (size_t)frame[0] << 24 | (size_t)frame[1] << 16 | (size_t)frame[2] << 8 | frame[3];
                if (s->in.len - used - 4 < length)
                    break;
                switch (classify(frame + 4, length)) {
                case FRAME_RESPONSE:
                    s->subscribed = 1;
                    break;
                case FRAME_CHANGE:
                    s->delivered++;
                    break;
                case FRAME_OTHER:
                    break;
                }
                used += 4 + length;
            }
        }
        memmove(s->in.data, s->in.data + used, s->in.len - used);
        s->in.len -= used;
        if (s->delivered != before) {
            *changes += s->delivered - before;
            *last = now_ns();
        }
        if ((size_t)n < s->in.cap - s->in.len)
            break;
    }
    return 1;
}

/* Appends the publish of change number `index`. */
static void put_publish(struct buf *out, enum protocol proto, uint64_t index)
{
    char payload[32];
    int length = snprintf(payload, sizeof payload, "b=%llu", (unsigned long long)index);
    if (proto == PROTO_REDIS) {
        char command[96];
        int n = snprintf(command, sizeof command, "*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$%d\r\n%s\r\n", length, payload);
        buf_put(out, command, (size_t)n);
    } else {
        put_mentor_set_frame(out, index + 2, payload);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: fanout --proto redis|mentory --socket PATH --subscribers N [--events E]\n"
                    "              [--window 32] [--timeout 30]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    enum protocol proto = PROTO_MENTORY;
    const char *path = NULL;
    unsigned subscribers = 0, window = 32;
    uint64_t events = 0;
    double timeout = 30;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (strcmp(flag, "--proto") == 0 && strcmp(value, "redis") == 0)
            proto = PROTO_REDIS;
        else if (strcmp(flag, "--proto") == 0 && strcmp(value, "mentory") == 0)
            proto = PROTO_MENTORY;
        else if (strcmp(flag, "--socket") == 0)
            path = value;
        else if (strcmp(flag, "--subscribers") == 0)
            subscribers = (unsigned)strtoul(value, NULL, 10);
        else if (strcmp(flag, "--events") == 0)
            events = strtoull(value, NULL, 10);
        else if (strcmp(flag, "--window") == 0)
            window = (unsigned)strtoul(value, NULL, 10);
        else if (strcmp(flag, "--timeout") == 0)
            timeout = strtod(value, NULL);
        else
            usage();
    }
    if (argc % 2 == 0 || path == NULL || subscribers == 0 || window == 0 || timeout <= 0)
        usage();
    if (events == 0)
        events = subscribers >= 200 ? 1000 : 200000 / subscribers;
    raise_fd_limit();
    signal(SIGPIPE, SIG_IGN);

    int poll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (poll_fd < 0)
        die("epoll_create1");

    /* Subscribe everyone, then wait until each subscription is confirmed. */
    struct subscriber *subs = calloc(subscribers, sizeof *subs);
    if (subs == NULL)
        die("calloc");
    struct buf setup = {0};
    if (proto == PROTO_REDIS) {
        static const char subscribe[] = "*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n";
        buf_put(&setup, subscribe, sizeof subscribe - 1);
    } else {
        put_hello_frame(&setup, "fanout");
        put_subscribe_frame(&setup, 1, "mentor");
    }
    uint64_t changes = 0, last = 0;
    for (unsigned i = 0; i < subscribers; i++) {
        subs[i].fd = connect_unix(path);
        write_all(subs[i].fd, setup.data, setup.len);
        set_nonblocking(subs[i].fd);
        struct epoll_event event = {.events = EPOLLIN, .data.u64 = i};
        if (epoll_ctl(poll_fd, EPOLL_CTL_ADD, subs[i].fd, &event) != 0)
            die("epoll_ctl");
    }
    buf_free(&setup);
    unsigned confirmed = 0;
    struct epoll_event ready[256];
    uint64_t deadline = now_ns() + (uint64_t)(timeout * 1e9);
    while (confirmed < subscribers) {
        int n = epoll_wait(poll_fd, ready, 256, 100);
        for (int k = 0; k < n; k++) {
            struct subscriber *s = &subs[ready[k].data.u64];
            int was = s->subscribed;
            if (!drain(proto, s, &changes, &last)) {
                fprintf(stderr, "fanout: a subscriber was closed while subscribing\n");
                return 1;
            }
            confirmed += s->subscribed && !was;
        }
        if (now_ns() > deadline) {
            fprintf(stderr, "fanout: %u of %u subscriptions confirmed in %.0f s\n", confirmed, subscribers, timeout);
            return 1;
        }
    }

    /* The publisher: handshaken with a blocking read, then non-blocking in the loop. */
    int publisher = connect_unix(path);
    struct buf out = {0}, in = {0};
    if (proto == PROTO_MENTORY) {
        put_hello_frame(&out, "fanout-publisher");
        write_all(publisher, out.data, out.len);
        out.len = 0;
        read_responses(publisher, proto, 1, &in);
    }
    set_nonblocking(publisher);
    struct epoll_event publisher_event = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    if (epoll_ctl(poll_fd, EPOLL_CTL_ADD, publisher, &publisher_event) != 0)
        die("epoll_ctl");

    uint64_t expected = events * subscribers, published = 0, answered = 0, errors = 0;
    uint64_t start = now_ns(), progress = start;
    last = start;
    changes = 0;
    for (unsigned i = 0; i < subscribers; i++)
        subs[i].delivered = 0;
    while (changes < expected) {
        /* Publish up to the window. */
        if (published < events && published - answered < window) {
            out.len = 0;
            while (published < events && published - answered < window)
                put_publish(&out, proto, published++);
            write_all(publisher, out.data, out.len);
        }
        int n = epoll_wait(poll_fd, ready, 256, 100);
        uint64_t before = changes;
        for (int k = 0; k < n; k++) {
            if (ready[k].data.u64 == UINT64_MAX) {
                buf_reserve(&in, 65536);
                ssize_t got = read(publisher, in.data + in.len, in.cap - in.len);
                if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
                    fprintf(stderr, "fanout: the publisher's connection closed\n");
                    return 1;
                }
                if (got > 0) {
                    in.len += (size_t)got;
                    unsigned count = 0, failed = 0;
                    size_t used = count_responses(proto, in.data, in.len, &count, &failed);
                    memmove(in.data, in.data + used, in.len - used);
                    in.len -= used;
                    answered += count;
                    errors += failed;
                }
                continue;
            }
            if (!drain(proto, &subs[ready[k].data.u64], &changes, &last)) {
                fprintf(stderr, "fanout: a subscriber's connection closed\n");
                return 1;
            }
        }
        uint64_t now = now_ns();
        if (changes != before || n > 0)
            progress = now;
        else if (now - progress > (uint64_t)(timeout * 1e9)) {
            fprintf(stderr, "fanout: no progress for %.0f s: %llu of %llu changes delivered\n", timeout,
                    (unsigned long long)changes, (unsigned long long)expected);
            return 1;
        }
    }
    double seconds = (double)(last - start) / 1e9;
    printf("subscribers=%u proto=%s events=%llu delivered=%llu seconds=%.3f events_per_s=%.0f errors=%llu\n",
           subscribers, proto == PROTO_REDIS ? "redis" : "mentory", (unsigned long long)events,
           (unsigned long long)changes, seconds, (double)changes / seconds, (unsigned long long)errors);
    return errors == 0 ? 0 : 1;
}
