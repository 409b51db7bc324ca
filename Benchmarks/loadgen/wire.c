/*
 * wire.c - hand-encoded mentoryd frames and response counting (see wire.h).
 *
 * Protobuf encoding used here: a field's key is (number << 3 | wire type);
 * wire type 0 is a varint, 2 is length-delimited (a length varint, then bytes).
 */
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_reserve(struct buf *b, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *data = realloc(b->data, cap);
        if (data == NULL) {
            perror("realloc");
            exit(1);
        }
        b->data = data;
        b->cap = cap;
    }
}

void buf_put(struct buf *b, const void *bytes, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
}

void buf_free(struct buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static void put_varint(struct buf *b, uint64_t value)
{
    uint8_t bytes[10];
    size_t n = 0;
    do {
        bytes[n] = (uint8_t)(value & 0x7f);
        value >>= 7;
        if (value != 0)
            bytes[n] |= 0x80;
        n++;
    } while (value != 0);
    buf_put(b, bytes, n);
}

static void put_key(struct buf *b, unsigned field, unsigned wire_type)
{
    put_varint(b, (uint64_t)field << 3 | wire_type);
}

/* A length-delimited field holding `n` bytes. */
static void put_bytes_field(struct buf *b, unsigned field, const void *bytes, size_t n)
{
    put_key(b, field, 2);
    put_varint(b, n);
    buf_put(b, bytes, n);
}

static void put_string_field(struct buf *b, unsigned field, const char *text)
{
    put_bytes_field(b, field, text, strlen(text));
}

static void put_varint_field(struct buf *b, unsigned field, uint64_t value)
{
    put_key(b, field, 0);
    put_varint(b, value);
}

/* Appends the 4-byte big-endian length of `payload`, then Envelope{field: payload}. */
static void put_envelope_frame(struct buf *out, unsigned field, const struct buf *payload)
{
    struct buf envelope = {0};
    put_bytes_field(&envelope, field, payload->data, payload->len);
    uint8_t length[4] = {
        (uint8_t)(envelope.len >> 24), (uint8_t)(envelope.len >> 16),
        (uint8_t)(envelope.len >> 8), (uint8_t)envelope.len,
    };
    buf_put(out, length, 4);
    buf_put(out, envelope.data, envelope.len);
    buf_free(&envelope);
}

void put_hello_frame(struct buf *out, const char *client_name)
{
    struct buf hello = {0};
    put_varint_field(&hello, 1, 1);           /* Hello.protocol_version */
    put_string_field(&hello, 2, client_name); /* Hello.client_name */
    put_envelope_frame(out, 1, &hello);       /* Envelope.hello */
    buf_free(&hello);
}

/* Request{id, namespace, method, body}; an empty body is left out, as proto3 does. */
static void put_request_frame(struct buf *out, uint64_t id, const char *namespace_,
                              const char *method, const struct buf *body)
{
    struct buf request = {0};
    put_varint_field(&request, 1, id);
    put_string_field(&request, 2, namespace_);
    put_string_field(&request, 3, method);
    if (body != NULL && body->len > 0)
        put_bytes_field(&request, 4, body->data, body->len);
    put_envelope_frame(out, 3, &request); /* Envelope.request */
    buf_free(&request);
}

void put_ping_frame(struct buf *out, uint64_t id)
{
    put_request_frame(out, id, "session", "ping", NULL);
}

void put_subscribe_frame(struct buf *out, uint64_t id, const char *topic)
{
    struct buf subscription = {0}, subscribe = {0};
    put_string_field(&subscription, 1, topic);                             /* TopicSubscription.topic */
    put_bytes_field(&subscribe, 1, subscription.data, subscription.len); /* SubscribeRequest.topics */
    put_request_frame(out, id, "session", "subscribe", &subscribe);
    buf_free(&subscription);
    buf_free(&subscribe);
}

void put_mentor_set_frame(struct buf *out, uint64_t id, const char *content)
{
    struct buf set = {0};
    put_string_field(&set, 1, content); /* MentorSetRequest.content */
    put_varint_field(&set, 2, 1);       /* .character = MENTOR_CHARACTER_COOL */
    put_request_frame(out, id, "mentor", "set", &set);
    buf_free(&set);
}

/* YYYY-MM-DD of the day `index` days after 1000-01-01 (Howard Hinnant's civil_from_days). */
static void record_date(unsigned index, char out[16])
{
    long days = (long)index + 365183; /* 1000-01-01 counted from 0000-03-01 */
    long era = days / 146097;
    long day_of_era = days - era * 146097;
    long year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
    long day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    long month_prime = (5 * day_of_year + 2) / 153;
    long day = day_of_year - (153 * month_prime + 2) / 5 + 1;
    long month = month_prime < 10 ? month_prime + 3 : month_prime - 9;
    long year = era * 400 + year_of_era + (month <= 2 ? 1 : 0);
    snprintf(out, 16, "%04ld-%02ld-%02ld", year % 10000, month % 100, day % 100);
}

void put_diary_add_frame(struct buf *out, uint64_t id, unsigned day_index)
{
    char date[16];
    char title[48];
    record_date(day_index, date);
    snprintf(title, sizeof title, "Benchmark entry %u", day_index);

    struct buf add = {0};
    put_string_field(&add, 1, date);  /* DiaryAddRequest.record_date */
    put_string_field(&add, 2, title); /* .title */
    put_string_field(&add, 3,         /* .text */
                     "A day worth remembering, written down before it fades. "
                     "A day worth remembering, written down before it fades. "
                     "A day worth remembering, written down before it fades. "
                     "A day worth remembering, written down before it fades. ");
    put_varint_field(&add, 4, 6); /* .emotion = EMOTION_PLEASANT */
    for (int item = 0; item < 2; item++) {
        char text[64];
        struct buf action = {0};
        snprintf(text, sizeof text, "Follow-up %d of entry %u", item, day_index);
        put_string_field(&action, 2, text); /* ActionItem.text */
        put_bytes_field(&add, 6, action.data, action.len); /* .action_items */
        buf_free(&action);
    }
    put_request_frame(out, id, "diary", "add", &add);
    buf_free(&add);
}

void put_requests(struct buf *out, enum protocol proto, unsigned count, uint64_t first_id)
{
    static const char resp_ping[] = "*1\r\n$4\r\nPING\r\n";
    for (unsigned i = 0; i < count; i++) {
        if (proto == PROTO_REDIS)
            buf_put(out, resp_ping, sizeof resp_ping - 1);
        else
            put_ping_frame(out, first_id + i);
    }
}

int wire_get_varint(const uint8_t **p, const uint8_t *end, uint64_t *value)
{
    uint64_t result = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t byte = *(*p)++;
        result |= (uint64_t)(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) {
            *value = result;
            return 1;
        }
    }
    return 0;
}

/*
 * 1 when `payload` is Envelope{response{..., body}}: a success. Error responses
 * (Response.error, field 3), ConnectionErrors and anything unexpected give 0.
 * Only the outer field keys are read; nothing is decoded beyond that.
 */
static int is_success(const uint8_t *payload, size_t len)
{
    const uint8_t *p = payload, *end = payload + len;
    uint64_t key, length;
    if (!wire_get_varint(&p, end, &key) || key != (4u << 3 | 2) || !wire_get_varint(&p, end, &length) ||
        length > (uint64_t)(end - p))
        return 0;
    end = p + length; /* the Response message */
    while (p < end) {
        if (!wire_get_varint(&p, end, &key))
            return 0;
        if ((key >> 3) == 3)
            return 0; /* Response.error */
        if ((key & 7) == 0) {
            uint64_t ignored;
            if (!wire_get_varint(&p, end, &ignored))
                return 0;
        } else if ((key & 7) == 2) {
            if (!wire_get_varint(&p, end, &length) || length > (uint64_t)(end - p))
                return 0;
            p += length;
        } else {
            return 0;
        }
    }
    return 1;
}

size_t count_responses(enum protocol proto, const uint8_t *data, size_t len, unsigned *count,
                       unsigned *errors)
{
    size_t used = 0;
    if (proto == PROTO_REDIS) {
        const uint8_t *newline;
        while ((newline = memchr(data + used, '\n', len - used)) != NULL) {
            used = (size_t)(newline - data) + 1;
            (*count)++;
        }
        return used;
    }
    while (len - used >= 4) {
        const uint8_t *frame = data + used;
        size_t length = (size_t)frame[0] << 24 | (size_t)frame[1] << 16 | (size_t)frame[2] << 8 | frame[3];
        if (len - used - 4 < length)
            break;
        if (errors != NULL && proto == PROTO_MENTORY && !is_success(frame + 4, length))
            (*errors)++;
        used += 4 + length;
        (*count)++;
    }
    return used;
}
