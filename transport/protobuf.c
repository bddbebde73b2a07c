/* Protobuf wire format: varints (little-endian base 128), fixed32/64
 * little-endian, length-delimited payloads. See protobuf.h. */
#include "protobuf.h"

#include <stdlib.h>
#include <string.h>

void pb_buf_free(struct pb_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void pb_raw(struct pb_buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *d = realloc(b->data, cap);
		if (!d) {
			b->oom = true;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
}

void pb_varint(struct pb_buf *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;
	do {
		uint8_t byte = v & 0x7f;
		v >>= 7;
		tmp[n++] = byte | (v ? 0x80 : 0);
	} while (v);
	pb_raw(b, tmp, n);
}

void pb_tag(struct pb_buf *b, uint32_t field, enum pb_wire wt)
{
	pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wt);
}

void pb_uint_always(struct pb_buf *b, uint32_t field, uint64_t v)
{
	pb_tag(b, field, PB_VARINT);
	pb_varint(b, v);
}

void pb_uint(struct pb_buf *b, uint32_t field, uint64_t v)
{
	if (v)
		pb_uint_always(b, field, v);
}

void pb_int32(struct pb_buf *b, uint32_t field, int32_t v)
{
	/* int32 is sign-extended to 64 bits on the wire: -1 is 10 bytes */
	if (v)
		pb_uint_always(b, field, (uint64_t)(int64_t)v);
}

void pb_bool(struct pb_buf *b, uint32_t field, bool v)
{
	if (v)
		pb_uint_always(b, field, 1);
}

static void put_fixed(struct pb_buf *b, uint64_t v, size_t n)
{
	uint8_t tmp[8];
	for (size_t i = 0; i < n; i++)
		tmp[i] = (uint8_t)(v >> (8 * i));
	pb_raw(b, tmp, n);
}

void pb_float_always(struct pb_buf *b, uint32_t field, float v)
{
	uint32_t bits;
	memcpy(&bits, &v, sizeof(bits));
	pb_tag(b, field, PB_FIXED32);
	put_fixed(b, bits, 4);
}

void pb_float(struct pb_buf *b, uint32_t field, float v)
{
	if (v != 0.0f)
		pb_float_always(b, field, v);
}

void pb_double(struct pb_buf *b, uint32_t field, double v)
{
	if (v == 0.0)
		return;
	uint64_t bits;
	memcpy(&bits, &v, sizeof(bits));
	pb_tag(b, field, PB_FIXED64);
	put_fixed(b, bits, 8);
}

void pb_bytes(struct pb_buf *b, uint32_t field, const void *p, size_t n)
{
	pb_tag(b, field, PB_LEN);
	pb_varint(b, n);
	pb_raw(b, p, n);
}

void pb_string_always(struct pb_buf *b, uint32_t field, const char *s)
{
	pb_bytes(b, field, s ? s : "", s ? strlen(s) : 0);
}

void pb_string(struct pb_buf *b, uint32_t field, const char *s)
{
	if (s && *s)
		pb_string_always(b, field, s);
}

void pb_msg(struct pb_buf *b, uint32_t field, const struct pb_buf *sub)
{
	if (sub->oom) {
		b->oom = true;
		return;
	}
	pb_bytes(b, field, sub->data, sub->len);
}

void pb_map_entry(struct pb_buf *b, uint32_t field, const char *key,
		  const char *value)
{
	struct pb_buf e = {0};
	pb_string(&e, 1, key);
	pb_string(&e, 2, value);
	pb_msg(b, field, &e);
	pb_buf_free(&e);
}

/* ---- decoding ---- */

int pb_read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned i = 0; i < 10; i++) {
		if (*p >= end)
			return -1;
		uint8_t byte = *(*p)++;
		/* the 10th byte may only carry the top bit of a 64-bit value */
		if (i == 9 && byte > 1)
			return -1;
		x |= (uint64_t)(byte & 0x7f) << (7 * i);
		if (!(byte & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

static uint64_t get_fixed(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

int pb_next(struct pb_reader *r, struct pb_field *f)
{
	if (r->p >= r->end)
		return 0;
	uint64_t key;
	if (pb_read_varint(&r->p, r->end, &key) < 0)
		return -1;
	if (key >> 3 == 0 || key >> 3 > 0x1fffffff)
		return -1;
	memset(f, 0, sizeof(*f));
	f->num = (uint32_t)(key >> 3);
	f->wt = (enum pb_wire)(key & 7);
	size_t avail = (size_t)(r->end - r->p);
	switch (f->wt) {
	case PB_VARINT:
		return pb_read_varint(&r->p, r->end, &f->u) < 0 ? -1 : 1;
	case PB_FIXED64:
		if (avail < 8)
			return -1;
		f->u = get_fixed(r->p, 8);
		r->p += 8;
		return 1;
	case PB_FIXED32:
		if (avail < 4)
			return -1;
		f->u = get_fixed(r->p, 4);
		r->p += 4;
		return 1;
	case PB_LEN: {
		uint64_t n;
		if (pb_read_varint(&r->p, r->end, &n) < 0)
			return -1;
		if (n > (uint64_t)(r->end - r->p))
			return -1;
		f->data = r->p;
		f->len = (size_t)n;
		r->p += n;
		return 1;
	}
	default:
		/* groups (3, 4) are long deprecated and unused by these APIs */
		return -1;
	}
}

bool pb_valid(const void *p, size_t n)
{
	struct pb_reader r = pb_reader(p, n);
	struct pb_field f;
	int rc;
	while ((rc = pb_next(&r, &f)) == 1)
		;
	return rc == 0;
}

float pb_as_float(const struct pb_field *f)
{
	uint32_t bits = (uint32_t)f->u;
	float v;
	memcpy(&v, &bits, sizeof(v));
	return v;
}

double pb_as_double(const struct pb_field *f)
{
	double v;
	memcpy(&v, &f->u, sizeof(v));
	return v;
}

char *pb_strdup(const struct pb_field *f)
{
	char *s = malloc(f->len + 1);
	if (!s)
		return NULL;
	if (f->len)
		memcpy(s, f->data, f->len);
	s[f->len] = '\0';
	return s;
}

void pb_strcpy(const struct pb_field *f, char *buf, size_t n)
{
	if (!n)
		return;
	size_t k = f->len < n - 1 ? f->len : n - 1;
	if (k)
		memcpy(buf, f->data, k);
	buf[k] = '\0';
}
