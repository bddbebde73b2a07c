#include "shell_quote.h"

#include <stdlib.h>
#include <string.h>

/* Inside single quotes every byte is literal except the quote itself, which
 * is written as '\'' (close, escaped quote, reopen). */
char *sh_quote(const char *s, size_t len)
{
	size_t quotes = 0;
	for (size_t i = 0; i < len; i++)
		quotes += s[i] == '\'';
	char *out = malloc(len + quotes * 3 + 3);
	if (!out)
		return NULL;
	char *p = out;
	*p++ = '\'';
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\'') {
			memcpy(p, "'\\''", 4);
			p += 4;
		} else {
			*p++ = s[i];
		}
	}
	*p++ = '\'';
	*p = '\0';
	return out;
}
