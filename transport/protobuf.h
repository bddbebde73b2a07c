/* A small protobuf wire codec: enough to hand-write the messages a gRPC
 * client needs. The encoder appends fields to a growable buffer; the
 * decoder walks one message's fields in order and never reads past the
 * buffer it was given. Unknown fields need no handling: a caller simply
 * ignores field numbers it does not know (every wire type is skipped). */
#ifndef SBFS_TRANSPORT_PROTOBUF_H
#define SBFS_TRANSPORT_PROTOBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pb_wire {
	PB_VARINT = 0,
	PB_FIXED64 = 1,
	PB_LEN = 2,
	PB_FIXED32 = 5,
};

/* ---- encoding ---- */

struct pb_buf {
	uint8_t *data;
	size_t len, cap;
	bool oom; /* an append failed: the buffer is incomplete */
};

void pb_buf_free(struct pb_buf *b);
void pb_raw(struct pb_buf *b, const void *p, size_t n);
void pb_varint(struct pb_buf *b, uint64_t v);
void pb_tag(struct pb_buf *b, uint32_t field, enum pb_wire wt);

/* proto3 scalars: skipped when zero/empty, as proto3 does without presence */
void pb_uint(struct pb_buf *b, uint32_t field, uint64_t v);
void pb_int32(struct pb_buf *b, uint32_t field, int32_t v); /* negative: 10 bytes */
void pb_bool(struct pb_buf *b, uint32_t field, bool v);
void pb_string(struct pb_buf *b, uint32_t field, const char *s);
void pb_float(struct pb_buf *b, uint32_t field, float v);
void pb_double(struct pb_buf *b, uint32_t field, double v);

/* Always written, even when zero/empty: proto3 `optional` fields the caller
 * set, repeated elements, and oneof members. */
void pb_uint_always(struct pb_buf *b, uint32_t field, uint64_t v);
void pb_float_always(struct pb_buf *b, uint32_t field, float v);
void pb_bytes(struct pb_buf *b, uint32_t field, const void *p, size_t n);
void pb_string_always(struct pb_buf *b, uint32_t field, const char *s);
/* A nested message (written even when empty) */
void pb_msg(struct pb_buf *b, uint32_t field, const struct pb_buf *sub);
/* One entry of a map<string,string>: {1: key, 2: value} */
void pb_map_entry(struct pb_buf *b, uint32_t field, const char *key,
		  const char *value);

/* ---- decoding ---- */

struct pb_reader {
	const uint8_t *p, *end;
};

struct pb_field {
	uint32_t num;
	enum pb_wire wt;
	uint64_t u;            /* VARINT value, or FIXED32/FIXED64 bits */
	const uint8_t *data;   /* LEN payload */
	size_t len;
};

static inline struct pb_reader pb_reader(const void *p, size_t n)
{
	return (struct pb_reader){(const uint8_t *)p, (const uint8_t *)p + n};
}

/* Next field: 1 = got one, 0 = clean end, -1 = malformed (truncated,
 * overlong varint, field number 0, or a group/unknown wire type). */
int pb_next(struct pb_reader *r, struct pb_field *f);
/* Whole message well-formed (recursion not implied). */
bool pb_valid(const void *p, size_t n);

int pb_read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v);

static inline int32_t pb_as_int32(const struct pb_field *f)
{
	return (int32_t)(uint32_t)f->u;
}
float pb_as_float(const struct pb_field *f);
double pb_as_double(const struct pb_field *f);
static inline struct pb_reader pb_sub(const struct pb_field *f)
{
	return pb_reader(f->data, f->len);
}
/* LEN field as a malloc'd NUL-terminated string (NULL on OOM). */
char *pb_strdup(const struct pb_field *f);
/* Copies into buf (truncating, always NUL-terminated). */
void pb_strcpy(const struct pb_field *f, char *buf, size_t n);

#endif
