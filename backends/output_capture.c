#include "output_capture.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int output_capture_cb(void *arg, const char *d, size_t n)
{
	struct output_capture *c = arg;
	if (c->len + n > c->limit) {
		if (!c->keep_head)
			return -EFBIG;
		n = c->limit - c->len;
	}
	if (c->len + n + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 4096;
		while (cap < c->len + n + 1)
			cap *= 2;
		char *p = realloc(c->data, cap);
		if (!p)
			return -ENOMEM;
		c->data = p;
		c->cap = cap;
	}
	memcpy(c->data + c->len, d, n);
	c->len += n;
	c->data[c->len] = '\0';
	return 0;
}

void output_capture_free(struct output_capture *c)
{
	free(c->data);
	memset(c, 0, sizeof *c);
}
