#include "fuse_requests.h"

static const char *const kind_names[FRQ_KINDS] = {
	[FRQ_LOOKUP] = "lookup", [FRQ_FORGET] = "forget",
	[FRQ_GETATTR] = "getattr", [FRQ_SETATTR] = "setattr",
	[FRQ_READLINK] = "readlink", [FRQ_MKNOD] = "mknod",
	[FRQ_MKDIR] = "mkdir", [FRQ_UNLINK] = "unlink", [FRQ_RMDIR] = "rmdir",
	[FRQ_SYMLINK] = "symlink", [FRQ_RENAME] = "rename", [FRQ_LINK] = "link",
	[FRQ_OPEN] = "open", [FRQ_READ] = "read", [FRQ_WRITE] = "write",
	[FRQ_FLUSH] = "flush", [FRQ_RELEASE] = "release", [FRQ_FSYNC] = "fsync",
	[FRQ_OPENDIR] = "opendir", [FRQ_READDIR] = "readdir",
	[FRQ_READDIRPLUS] = "readdirplus", [FRQ_RELEASEDIR] = "releasedir",
	[FRQ_FSYNCDIR] = "fsyncdir", [FRQ_STATFS] = "statfs",
	[FRQ_SETXATTR] = "setxattr", [FRQ_GETXATTR] = "getxattr",
	[FRQ_LISTXATTR] = "listxattr", [FRQ_REMOVEXATTR] = "removexattr",
	[FRQ_CREATE] = "create",
};

void fuse_requests_status(struct fuse_requests *r, json_t *obj)
{
	json_t *o = json_object();
	uint64_t total = 0;
	for (int k = 0; k < FRQ_KINDS; k++) {
		uint64_t n = atomic_load_explicit(&r->n[k], memory_order_relaxed);
		total += n;
		if (n)
			json_object_set_new(o, kind_names[k], json_integer((json_int_t)n));
	}
	json_object_set_new(o, "total", json_integer((json_int_t)total));
	json_object_set_new(obj, "requests", o);
}
