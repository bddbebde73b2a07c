#include "wb_park.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "fs/core/file_state.h"
#include "wb_journal.h"

void wb_park(struct file_state *f, unsigned handles_left)
{
	/* Not while a fetch streams into the spool without the lock, nor
	 * while the spool is a read cache (fs_core.c's budget owns those). */
	if (f->fd < 0 || !f->wb_journal || f->wb_seq <= 0 || !f->wb_durable ||
	    !f->dirty || f->unlinked || f->n_inflight > 0 || f->retained ||
	    f->handles > handles_left)
		return;
	close(f->fd);
	f->fd = -1;
}

int wb_unpark(struct file_state *f)
{
	if (f->fd >= 0 || !f->wb_journal || f->wb_seq <= 0)
		return 0;
	int fd = wb_journal_reopen(f->wb_journal, f->wb_seq);
	if (fd < 0) {
		int e = errno;
		if (e != EMFILE && e != ENFILE)
			sb_warn("write-back: cannot open the journal entry of a "
				"pending file again: %s (its upload is tried again "
				"at the next sync, sbexec or unmount)", strerror(e));
		return -e;
	}
	f->fd = fd;
	/* The entry is the spool now: what is written next reaches it. */
	f->wb_copied = false;
	return 0;
}
