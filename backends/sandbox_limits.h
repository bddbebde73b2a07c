/* Caps on what a sandbox (or a vendor API speaking for it) can make the
 * daemon hold in memory. The sandbox is untrusted: a directory of ten
 * million entries, a 1 GiB link target or a JSON reply of nested arrays
 * must end in a clear error and a log line, never in the daemon running
 * out of memory. One place, so the figures in the README match. */
#ifndef SBFS_SANDBOX_LIMITS_H
#define SBFS_SANDBOX_LIMITS_H

#include <stddef.h>

/* A single name (NAME_MAX). Longer names are never shown. */
#define SB_LIMIT_NAME 255
/* A symlink target (PATH_MAX less the NUL). */
#define SB_LIMIT_LINK_TARGET 4095
/* One directory listing: entries, and raw bytes of the helper command's
 * output (names, attributes and link targets). About 200 MiB of daemon
 * memory at the entry cap; beyond it the directory cannot be listed on
 * the mount (EFBIG) but stays reachable with sbexec. */
#define SB_LIMIT_LIST_ENTRIES ((size_t)1 << 18)
#define SB_LIMIT_LIST_BYTES ((size_t)64 << 20)
/* A listing that comes as JSON (Modal's file helper) costs ~7 bytes of
 * parser memory per input byte (262,144 entries: 70 MB of JSON, 490 MB
 * parsed), so JSON listings are capped lower and a bigger directory is
 * listed through the compact shell format instead. The token cap (values
 * and keys; a FileEntry has about 25) refuses a reply built to explode in
 * the parser, such as [0,0,0,...], before it is parsed. */
#define SB_LIMIT_LIST_JSON_BYTES ((size_t)16 << 20)
#define SB_LIMIT_LIST_JSON_VALUES ((size_t)1 << 21)

#endif
