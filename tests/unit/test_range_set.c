#include "fs/core/range_set.h"
#include "unit.h"

static void check_ranges(const struct range_set *s, const off_t *want, size_t n)
{
	CHECK_INT(s->n, n);
	for (size_t i = 0; i < n && i < s->n; i++) {
		CHECK_INT(s->v[i].start, want[2 * i]);
		CHECK_INT(s->v[i].end, want[2 * i + 1]);
	}
}

int main(void)
{
	struct range_set s = {0};
	off_t a, b;

	CHECK(range_set_first_gap(&s, 0, 10, &a, &b));
	CHECK_INT(a, 0);
	CHECK_INT(b, 10);
	CHECK(range_set_covers(&s, 5, 5)); /* empty interval */

	range_set_add(&s, 10, 20);
	range_set_add(&s, 30, 40);
	range_set_add(&s, 0, 5);
	check_ranges(&s, (off_t[]){0, 5, 10, 20, 30, 40}, 3);

	/* Touching ranges merge. */
	range_set_add(&s, 5, 10);
	check_ranges(&s, (off_t[]){0, 20, 30, 40}, 2);

	/* A range spanning several swallows them. */
	range_set_add(&s, 50, 60);
	range_set_add(&s, 15, 55);
	check_ranges(&s, (off_t[]){0, 60}, 1);

	range_set_add(&s, 100, 200);
	CHECK(range_set_covers(&s, 0, 60));
	CHECK(!range_set_covers(&s, 0, 61));
	CHECK(range_set_first_gap(&s, 40, 150, &a, &b));
	CHECK_INT(a, 60);
	CHECK_INT(b, 100);
	CHECK(range_set_first_gap(&s, 150, 250, &a, &b));
	CHECK_INT(a, 200);
	CHECK_INT(b, 250);
	CHECK(!range_set_first_gap(&s, 120, 180, &a, &b));

	/* Truncation keeps what lies before the cut. */
	range_set_clip(&s, 150);
	check_ranges(&s, (off_t[]){0, 60, 100, 150}, 2);
	range_set_clip(&s, 100);
	check_ranges(&s, (off_t[]){0, 60}, 1);
	range_set_clip(&s, 0);
	CHECK_INT(s.n, 0);

	/* Many disjoint adds in reverse order grow the array. */
	for (int i = 100; i > 0; i--)
		range_set_add(&s, i * 10, i * 10 + 5);
	CHECK_INT(s.n, 100);
	CHECK_INT(s.v[0].start, 10);
	range_set_add(&s, 0, 2000);
	check_ranges(&s, (off_t[]){0, 2000}, 1);

	range_set_free(&s);
	return unit_done("range_set");
}
