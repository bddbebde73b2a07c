/* An in-memory sandbox for unit tests of the fs core: a struct
 * sb_backend_ops over a tree held in this process, behind the real
 * dispatcher (counters, hooks, dead checks), so the fs runs without FUSE
 * and without a sandbox. Reads go through the dispatcher's in-guest read
 * script, which the backend's exec answers; every other shell script
 * exits 127 (ENOTSUP), so no slot falls back to the shell unnoticed.
 * Hard links, chown and statfs are not modelled.
 *
 * Tests change the tree behind the mount's back (as an sbexec would) with
 * mem_put / mem_remove, make calls fail with mem_fail, and read the
 * sandbox's view with mem_get and the log of changing calls. */
#ifndef SBFS_MEM_BACKEND_H
#define SBFS_MEM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "backends/backend.h"

#define MEM_GUEST_UID 1000
#define MEM_GUEST_GID 1000

/* A backend over an empty tree holding the workdir /workspace. */
struct sb_backend *mem_backend_new(void);
void mem_backend_free(struct sb_backend *b);

/* Writes a regular file (parents made), as a command in the sandbox
 * would: a new mtime, and a new inode when it did not exist. */
int mem_put(struct sb_backend *b, const char *path, const char *data);
int mem_mkdirs(struct sb_backend *b, const char *path);
int mem_remove(struct sb_backend *b, const char *path);
/* A regular file's content (malloc'd, NUL-terminated) or NULL. */
char *mem_get(struct sb_backend *b, const char *path);
bool mem_exists(struct sb_backend *b, const char *path);

/* The next `times` calls of kind fail with err (a negative errno),
 * whatever their path; path non-NULL: only calls on that path. */
void mem_fail(struct sb_backend *b, enum sb_call kind, const char *path,
	      int err, unsigned times);

/* fn(arg) runs once, after the next call of kind has done its work and
 * before the dispatcher takes its answer: what the mount does while an
 * answer is on its way (the answer then tells of the sandbox before). */
void mem_after(struct sb_backend *b, enum sb_call kind, void (*fn)(void *arg),
	       void *arg);

/* While held, a read window stops after each segment it sent (its bytes
 * and their check line) until released: but its last one (BETWEEN: a
 * window on its way), or every one (AT_END: a read that has handed over
 * all it brought and not yet ended). */
enum mem_hold { MEM_HOLD_NONE, MEM_HOLD_BETWEEN, MEM_HOLD_AT_END };
void mem_hold_reads(struct sb_backend *b, enum mem_hold hold);

/* The changing calls so far, one line each ("write /workspace/a",
 * "rename /workspace/a /workspace/b", "remove /workspace/a", "mkdir ...",
 * "chmod ...", "utimens ...");
 * the string stays valid until the next call. */
/* Stats, listings and links tell no inode and no link count from now
 * on, as docker's archive stat and modal's and e2b's listings. */
void mem_tell_no_inodes(struct sb_backend *b);
/* Listings name every owner and group by a user name the mount cannot map
 * (SB_ID_UNTOLD), as modal's and e2b's can. */
void mem_tell_owner_names(struct sb_backend *b);

const char *mem_log(struct sb_backend *b);
void mem_log_clear(struct sb_backend *b);

/* Calls of one kind the dispatcher counted so far. */
unsigned long mem_calls(struct sb_backend *b, enum sb_call kind);

#endif
