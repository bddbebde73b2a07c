/* Standard base64 (RFC 4648, with or without padding). */
#ifndef SBFS_TRANSPORT_BASE64_H
#define SBFS_TRANSPORT_BASE64_H

#include <stddef.h>

/* Decodes NUL-terminated s into a malloc'd, NUL-terminated buffer; *len is
 * its length. NULL on invalid input or no memory. */
char *base64_decode(const char *s, size_t *len);

/* Encodes len bytes of d with padding into a malloc'd NUL-terminated
 * string; NULL when out of memory. */
char *base64_encode(const void *d, size_t len);

#endif
