/* A spool disk for unit tests, put under the fs core through its seam
 * (fs/core/spool_io.h): the real disk, but with a size the spools'
 * allocated blocks may not pass (a write gets what fits, then ENOSPC, as
 * on a full disk; punched and truncated blocks come back) and a number of
 * spool files open at once past which an open fails with EMFILE. */
#ifndef SBFS_SPOOL_FAULT_H
#define SBFS_SPOOL_FAULT_H

#include <stdint.h>

/* disk_bytes, max_open: 0 for no limit. Before any spool is made. */
void spool_fault_install(int64_t disk_bytes, unsigned max_open);
/* The real disk again; after every spool is freed. */
void spool_fault_remove(void);
/* Writes that met the full disk, and opens refused, so far. */
unsigned long spool_fault_enospc(void);
unsigned long spool_fault_emfile(void);
/* Bytes the spools hold on the disk now. */
int64_t spool_fault_used(void);

#endif
