#include "lock_order.h"

#ifdef SBFS_LOCK_CHECK
#include <stdlib.h>

#include "util/log.h"

static const char *const class_name[FS_LOCK_CLASSES] = {
	[FS_LOCK_SPOOL_FULL] = "spool-full lock",
	[FS_LOCK_PATHS] = "paths rwlock",
	[FS_LOCK_FILE] = "file lock",
	[FS_LOCK_RM_DRAIN] = "remove queue drain lock",
	[FS_LOCK_RM_QUEUE] = "remove queue lock",
	[FS_LOCK_WB_QUEUE] = "write-back queue lock",
	[FS_LOCK_TABLE] = "table lock",
	[FS_LOCK_JOURNAL] = "journal commit lock",
};

static _Thread_local unsigned short held[FS_LOCK_CLASSES];

void fs_lock_check_take(enum fs_lock_class c, bool trylock)
{
	for (int k = c + 1; !trylock && k < FS_LOCK_CLASSES; k++) {
		if (held[k]) {
			sb_err("lock order: %s taken while holding the %s "
			       "(fs/core/lock_order.h)", class_name[c], class_name[k]);
			abort();
		}
	}
	/* File locks nest (see the header); no other class does. */
	if (held[c] && c != FS_LOCK_FILE) {
		sb_err("lock order: %s taken twice", class_name[c]);
		abort();
	}
}

void fs_lock_check_held(enum fs_lock_class c, int delta)
{
	if (delta < 0 && held[c] == 0) {
		sb_err("lock order: %s released but not held", class_name[c]);
		abort();
	}
	held[c] = (unsigned short)(held[c] + delta);
}

void fs_lock_check_none(const char *what)
{
	for (int k = 0; k < FS_LOCK_CLASSES; k++) {
		if (held[k]) {
			sb_err("lock order: %s sent while holding the %s",
			       what, class_name[k]);
			abort();
		}
	}
}
#endif
