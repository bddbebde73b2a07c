#include "util/size_parse.h"
#include "unit.h"

static uint64_t mib(const char *s)
{
	uint64_t v = 0;
	return sb_parse_size_mib(s, &v) == 0 ? v : 0;
}

int main(void)
{
	CHECK_INT(mib("64"), 64);
	CHECK_INT(mib("64M"), 64);
	CHECK_INT(mib("64m"), 64);
	CHECK_INT(mib("64MiB"), 64);
	CHECK_INT(mib("64MB"), 64);
	CHECK_INT(mib("2G"), 2048);
	CHECK_INT(mib("2gib"), 2048);
	CHECK_INT(mib("1T"), 1024 * 1024);
	CHECK_INT(mib("1024K"), 1);
	CHECK_INT(mib("1K"), 1); /* rounded up */
	CHECK_INT(mib("1025K"), 2);
	/* refused */
	CHECK_INT(mib(""), 0);
	CHECK_INT(mib("0"), 0);
	CHECK_INT(mib("0G"), 0);
	CHECK_INT(mib("-1"), 0);
	CHECK_INT(mib("+1"), 0);
	CHECK_INT(mib(" 1"), 0);
	CHECK_INT(mib("1 G"), 0);
	CHECK_INT(mib("1X"), 0);
	CHECK_INT(mib("1GG"), 0);
	CHECK_INT(mib("1.5G"), 0);
	CHECK_INT(mib("99999999999999999999"), 0);
	CHECK_INT(mib("2000000T"), 0);
	uint64_t v = 7;
	CHECK_INT(sb_parse_size_mib(NULL, &v), -1);
	CHECK_INT(v, 7);
	return unit_done("size_parse");
}
