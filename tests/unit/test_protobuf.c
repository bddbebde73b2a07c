/* The protobuf wire codec against byte vectors computed by hand from the
 * encoding rules (varint base 128 little-endian, tag = field<<3 | wire). */
#include "transport/protobuf.h"
#include "unit.h"

#include <stdint.h>

static void test_varints(void)
{
	struct pb_buf b = {0};
	pb_varint(&b, 0);
	CHECK_MEM(b.data, b.len, "\x00", 1);
	b.len = 0;
	pb_varint(&b, 1);
	CHECK_MEM(b.data, b.len, "\x01", 1);
	b.len = 0;
	pb_varint(&b, 127);
	CHECK_MEM(b.data, b.len, "\x7f", 1);
	b.len = 0;
	pb_varint(&b, 300); /* 300 = 0b10_0101100 -> ac 02 */
	CHECK_MEM(b.data, b.len, "\xac\x02", 2);
	b.len = 0;
	pb_varint(&b, UINT64_MAX);
	CHECK_MEM(b.data, b.len, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10);
	/* decode back */
	const uint8_t *p = b.data;
	uint64_t v = 0;
	CHECK_INT(pb_read_varint(&p, b.data + b.len, &v), 0);
	CHECK(v == UINT64_MAX);
	/* an 11-byte varint and a 10th byte > 1 are malformed */
	const uint8_t over[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
	p = over;
	CHECK_INT(pb_read_varint(&p, over + sizeof(over), &v), -1);
	pb_buf_free(&b);
}

static void test_scalars(void)
{
	struct pb_buf b = {0};
	pb_uint(&b, 1, 150); /* the protobuf docs' example: 08 96 01 */
	CHECK_MEM(b.data, b.len, "\x08\x96\x01", 3);
	b.len = 0;
	pb_int32(&b, 1, -1); /* sign-extended: 10 bytes of payload */
	CHECK_MEM(b.data, b.len, "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
	b.len = 0;
	pb_int32(&b, 2, -137);
	/* -137 = 0xffffffffffffff77 -> f7 fe ff ff ff ff ff ff ff 01 */
	CHECK_MEM(b.data, b.len, "\x10\xf7\xfe\xff\xff\xff\xff\xff\xff\xff\x01", 11);
	b.len = 0;
	pb_uint(&b, 3, 0);    /* proto3 default: omitted */
	pb_string(&b, 4, ""); /* likewise */
	pb_bool(&b, 5, false);
	CHECK_INT(b.len, 0);
	pb_uint_always(&b, 6, 0); /* presence: written */
	CHECK_MEM(b.data, b.len, "\x30\x00", 2);
	b.len = 0;
	pb_string(&b, 2, "testing"); /* 12 07 t e s t i n g */
	CHECK_MEM(b.data, b.len, "\x12\x07testing", 9);
	b.len = 0;
	pb_float(&b, 2, 10.0f); /* 0x41200000 little-endian */
	CHECK_MEM(b.data, b.len, "\x15\x00\x00\x20\x41", 5);
	b.len = 0;
	pb_double(&b, 2, 1.5); /* 0x3ff8000000000000 */
	CHECK_MEM(b.data, b.len, "\x11\x00\x00\x00\x00\x00\x00\xf8\x3f", 9);
	b.len = 0;
	pb_uint(&b, 100000, 1); /* tag 100000<<3 = 800000 -> 80 ea 30 */
	CHECK_MEM(b.data, b.len, "\x80\xea\x30\x01", 4);
	pb_buf_free(&b);
}

static void test_nested_and_maps(void)
{
	struct pb_buf inner = {0}, outer = {0};
	pb_uint(&inner, 1, 150);
	pb_msg(&outer, 3, &inner); /* 1a 03 08 96 01 */
	CHECK_MEM(outer.data, outer.len, "\x1a\x03\x08\x96\x01", 5);
	outer.len = 0;
	struct pb_buf empty = {0};
	pb_msg(&outer, 20, &empty); /* oneof member sent even empty: a2 01 00 */
	CHECK_MEM(outer.data, outer.len, "\xa2\x01\x00", 3);
	outer.len = 0;
	pb_map_entry(&outer, 12, "A", "b"); /* 62 06 0a 01 41 12 01 62 */
	CHECK_MEM(outer.data, outer.len, "\x62\x06\x0a\x01" "A" "\x12\x01" "b", 8);

	/* decode a nested message back */
	struct pb_reader r = pb_reader(outer.data, outer.len);
	struct pb_field f;
	CHECK_INT(pb_next(&r, &f), 1);
	CHECK_INT(f.num, 12);
	CHECK_INT(f.wt, PB_LEN);
	struct pb_reader e = pb_sub(&f);
	char k[8] = "", v[8] = "";
	while (pb_next(&e, &f) == 1) {
		if (f.num == 1) pb_strcpy(&f, k, sizeof(k));
		if (f.num == 2) pb_strcpy(&f, v, sizeof(v));
	}
	CHECK(!strcmp(k, "A") && !strcmp(v, "b"));
	CHECK_INT(pb_next(&r, &f), 0);
	pb_buf_free(&inner);
	pb_buf_free(&outer);
	pb_buf_free(&empty);
}

static void test_unknown_fields(void)
{
	/* field 1 varint, 2 fixed64, 3 len, 4 fixed32, 5 varint(-1), 9 string */
	const uint8_t msg[] = {
		0x08, 0x96, 0x01,
		0x11, 1, 2, 3, 4, 5, 6, 7, 8,
		0x1a, 0x02, 0xaa, 0xbb,
		0x25, 9, 9, 9, 9,
		0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
		0x4a, 0x02, 'o', 'k',
	};
	struct pb_reader r = pb_reader(msg, sizeof(msg));
	struct pb_field f;
	char s[8] = "";
	int n = 0, rc;
	int32_t neg = 0;
	while ((rc = pb_next(&r, &f)) == 1) {
		n++;
		if (f.num == 9)
			pb_strcpy(&f, s, sizeof(s));
		if (f.num == 5)
			neg = pb_as_int32(&f);
	}
	CHECK_INT(rc, 0);
	CHECK_INT(n, 6);
	CHECK(!strcmp(s, "ok"));
	CHECK_INT(neg, -1);
	CHECK(pb_valid(msg, sizeof(msg)));
}

static void test_truncated(void)
{
	const uint8_t cases[][4] = {
		{0x08, 0x96},             /* varint cut */
		{0x12, 0x05, 'a', 'b'},   /* length past the end */
		{0x11, 1, 2, 3},          /* fixed64 cut */
		{0x15, 1, 2, 0},          /* fixed32 cut (3 of 4 given) */
	};
	const size_t lens[] = {2, 4, 4, 3};
	for (size_t i = 0; i < 4; i++)
		CHECK(!pb_valid(cases[i], lens[i]));
	/* group wire types and field number 0 are refused */
	CHECK(!pb_valid("\x0b\x0c", 2));
	CHECK(!pb_valid("\x00\x01", 2));
	/* a huge length must not wrap the pointer */
	const uint8_t huge[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
	CHECK(!pb_valid(huge, sizeof(huge)));
	CHECK(pb_valid("", 0));
}

int main(void)
{
	test_varints();
	test_scalars();
	test_nested_and_maps();
	test_unknown_fields();
	test_truncated();
	return unit_done("protobuf");
}
