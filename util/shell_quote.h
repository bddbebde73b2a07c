#ifndef SBFS_SHELL_QUOTE_H
#define SBFS_SHELL_QUOTE_H

#include <stddef.h>

/* The one shell-quoting function: returns a malloc'd single-quoted word
 * that a POSIX sh reads back as exactly the len bytes of s (which may hold
 * any byte but NUL). Only for backends whose exec takes a command string,
 * and for logs; argv-based paths never need it. NULL on allocation failure. */
char *sh_quote(const char *s, size_t len);

#endif
