#include "tool_errno.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* Spelled out rather than taken from the host's strerror(): the sandbox's
 * C library (glibc, musl) is not the host's, and these texts are the ones
 * both print in the C locale. */
static const struct {
	int err;
	const char *text;
} known[] = {
	{ENOSPC, "No space left on device"},
	{EDQUOT, "Disk quota exceeded"},
	{EDQUOT, "Quota exceeded"}, /* musl */
	{EROFS, "Read-only file system"},
	{EFBIG, "File too large"},
	{ENAMETOOLONG, "File name too long"},
	{ELOOP, "Too many levels of symbolic links"},
	{ELOOP, "Symbolic link loop"}, /* musl */
	{EIO, "Input/output error"},
	{EIO, "I/O error"}, /* musl */
	{ETXTBSY, "Text file busy"},
	{EMLINK, "Too many links"},
	{ENOTEMPTY, "Directory not empty"},
	{EEXIST, "File exists"},
	{ENOTDIR, "Not a directory"},
	{EISDIR, "Is a directory"},
	{ENOENT, "No such file or directory"},
	{EPERM, "Operation not permitted"},
	{EACCES, "Permission denied"},
};

int sb_tool_errno(const char *msg, int fallback)
{
	if (!msg)
		return fallback;
	const char *first = NULL;
	int err = fallback;
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		const char *at = strstr(msg, known[i].text);
		if (at && (!first || at < first)) {
			first = at;
			err = known[i].err;
		}
	}
	return err;
}
