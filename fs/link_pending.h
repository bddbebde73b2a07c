/* Write-back's deferred hard links. git writes each object under a
 * temporary name, links it to its final name and removes the first; a
 * link needs the file in the sandbox, so each object cost an upload and a
 * link call, one after the other, and a queued remove.
 *
 * A link of a file that has never reached the sandbox is made here only:
 * the file's node moves to the new name (its queued upload lands there,
 * and its journal entry names it) and its old name becomes an alias, a
 * name that shows that node: lookups and listings give its inode, so the
 * kernel sees one file with two names, as the sandbox will. When the
 * upload lands, the alias is linked in the sandbox (alias_landed) and
 * goes on showing the file's node until a lookup finds its attributes
 * stale (a command may have changed the name): it is then a node of its
 * own, as any other hard link's name.
 *
 * An unlink of the alias before it landed costs no call at all. A name
 * that goes (an unlink, a rename over it) while it is the file's own
 * swaps with the alias first, so the node the kernel holds for both names
 * stays with the name left. A rename of either name, or a link of the
 * file, makes the upload and the link land first.
 *
 * Only where the new name is known absent (the directory's listing is
 * current), as for a queued rmdir. A crash before the upload keeps the
 * file under its new name, not the old one (docs/reliability.md). */
#ifndef SBFS_LINK_PENDING_H
#define SBFS_LINK_PENDING_H

#include <stdint.h>

#include "fs_ops.h"

struct fs;
struct node;
struct file_state;

/* fs_link in write-back mode: 1 when the link was deferred (e: the
 * file's node, which both names show), 0 when it must go to the sandbox
 * now. No lock held. */
int link_pending_defer(struct fs *fs, uint64_t ino, uint64_t newparent,
		       const char *newname, struct fs_entry *e);
/* Before a rename of parent/name or over it (or, _ino, a link of inode
 * ino): when it is an alias whose link waits, or a file with one, the
 * upload and the link land now. 0, or the error that kept them from
 * landing. No lock held. */
int link_pending_settle(struct fs *fs, uint64_t parent, const char *name);
int link_pending_settle_ino(struct fs *fs, uint64_t ino);
/* Before parent/name goes (unlink, or replaced by a rename): a file
 * with an alias swaps names with it. Then, for an unlink, an alias whose
 * link waits goes without a call: 1. Otherwise 0: the remove goes on, of
 * an alias as of any name of a linked file. No lock held. */
int link_pending_name_goes(struct fs *fs, uint64_t parent, const char *name,
			   bool unlink);
/* A landed alias that link_pending_shown made a node of its own. */
struct alias_dissolved {
	uint64_t name_ino, file_ino; /* 0: none */
	dev_t dev;                   /* the identity it had */
	ino_t ino;
};
/* The node lookup of name c answers with: its file's node for an alias
 * (NULL otherwise). A landed alias whose attributes are stale becomes a
 * node of its own (NULL, *was filled), so the sandbox is asked. Table
 * lock held. */
struct node *link_pending_shown(struct fs *fs, struct node *c,
				struct alias_dissolved *was);
/* After that lookup asked the sandbox: where the answer names the same
 * file (its inode), the name is the file's alias again and the lookup
 * answers with the file's node (returned instead of shown), so the kernel
 * goes on seeing one inode with two names: the mount's own upload and
 * link, or a command's touch, reported by the watch, made the name's
 * attributes stale. Where the answer told no inode (docker, e2b), the
 * name keeps the identity it had, a node of its own. Table lock held. */
struct node *link_pending_rejoin(struct fs *fs, struct node *shown,
				 const struct alias_dissolved *was);
/* fs->upload_recorded: n's upload landed, so its alias is linked in the
 * sandbox now. f->lock held, table lock not. */
void link_pending_land(struct fs *fs, struct node *n, struct file_state *f);

#endif
