/*
 * wire.h - the few request encodings the load generator needs, built once.
 *
 * mentoryd: a frame is a 4-byte big-endian length and one serialized
 * mentory.v1.Envelope (docs/PROTOCOL.md). Only Hello, Request(session.ping),
 * Request(session.subscribe), Request(mentor.set) and Request(diary.add) are
 * encoded here, by hand, from the field numbers in
 * Sources/MentoryWire/Proto/mentory.proto.
 * Redis: RESP `*1\r\n$4\r\nPING\r\n`, answered by `+PONG\r\n`.
 * raw: the mentoryd ping frame, echoed back byte for byte by echo-server.
 */
#ifndef LOADGEN_WIRE_H
#define LOADGEN_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* Which server the client talks to; decides request bytes and response parsing. */
enum protocol { PROTO_RAW, PROTO_REDIS, PROTO_MENTORY };

/* A growable byte buffer. */
struct buf {
    uint8_t *data;
    size_t len;
    size_t cap;
};

/* Makes room for at least `n` more bytes after b->len. */
void buf_reserve(struct buf *b, size_t n);
void buf_put(struct buf *b, const void *bytes, size_t n);
void buf_free(struct buf *b);

/* Appends one length-prefixed Envelope{hello{protocol_version: 1, client_name}}. */
void put_hello_frame(struct buf *out, const char *client_name);

/* Appends one length-prefixed Envelope{request{id, "session", "ping"}} (empty body). */
void put_ping_frame(struct buf *out, uint64_t id);

/* Appends one length-prefixed Envelope{request{id, "diary", "add", DiaryAddRequest}}
 * for a distinct calendar day chosen by `day_index` (one entry per day is allowed). */
void put_diary_add_frame(struct buf *out, uint64_t id, unsigned day_index);

/* Appends one length-prefixed Envelope{request{id, "session", "subscribe",
 * SubscribeRequest{topics: [{topic}]}}}. */
void put_subscribe_frame(struct buf *out, uint64_t id, const char *topic);

/* Appends one length-prefixed Envelope{request{id, "mentor", "set",
 * MentorSetRequest{content, character: MENTOR_CHARACTER_COOL}}}. */
void put_mentor_set_frame(struct buf *out, uint64_t id, const char *content);

/* Appends `count` requests of `proto`: ping frames with ids first_id.. for raw and
 * mentoryd, RESP PINGs for Redis. */
void put_requests(struct buf *out, enum protocol proto, unsigned count, uint64_t first_id);

/* Reads a protobuf varint at *p (before end) into *value and moves *p past it; returns 0
 * when it is cut short. */
int wire_get_varint(const uint8_t **p, const uint8_t *end, uint64_t *value);

/*
 * Counts the whole responses at the start of data[0..len): for PROTO_REDIS every
 * '\n'-terminated line, otherwise every length-prefixed frame. Returns how many
 * bytes those responses take (the rest is a partial response to keep). When
 * `errors` is not NULL and proto is PROTO_MENTORY, adds the number of frames that
 * are not a successful Response (an error response or a ConnectionError).
 */
size_t count_responses(enum protocol proto, const uint8_t *data, size_t len, unsigned *count,
                       unsigned *errors);

#endif
