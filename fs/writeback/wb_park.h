/* A closed file waiting for its upload holds no descriptor of its own:
 * its journal entry (the spool itself, or a copy of its content made at
 * the close) holds the bytes, so the spool's descriptor is closed, and
 * the next file_lock opens the entry again (fs_internal.h). Without it,
 * every pending file held one: 237 of them under a limit of 256 made
 * every upload fail with EMFILE, for ever (issue 41). f->lock held. */
#ifndef SBFS_WB_PARK_H
#define SBFS_WB_PARK_H

struct file_state;

/* Closes f's descriptor if the journal holds its current content and at
 * most handles_left handles are open (1 at the last close's flush). */
void wb_park(struct file_state *f, unsigned handles_left);
/* Opens a parked f's journal entry as its spool again: 0, or -errno with
 * f->fd still -1 (its calls then fail with EBADF; a warning unless it was
 * for want of descriptors, which the upload queue waits out). */
int wb_unpark(struct file_state *f);

#endif
