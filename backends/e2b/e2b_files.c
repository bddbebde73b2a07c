/* File operations: upload with envd's POST /files (raw octet-stream, read
 * from the fd as curl sends it, never all in memory), and the
 * filesystem.Filesystem RPCs for list, stat, mkdir, remove and rename
 * (notes 1.6). Where E2B's semantics are not POSIX's (Remove is rm -rf,
 * MakeDir makes parents and has no mode, Move cannot refuse to replace)
 * the difference is bridged here or handed to the shell implementation. */
#include "e2b.h"
#include "backends/shell_ops.h"
#include "backends/exec_pump.h"
#include "util/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UPLOAD_MODE_DEFAULT 0644  /* 0666 & envd's umask */
#define MKDIR_MODE_DEFAULT 0755

static struct e2b_ids ids_of(struct sb_backend *b)
{
	struct e2b *e = b->priv;
	return (struct e2b_ids){.user = e->guest_name[0] ? e->guest_name : NULL,
				.uid = b->guest_uid, .gid = b->guest_gid};
}

struct upload {
	int fd;
	off_t size, pos;
};

static ssize_t upload_body(void *arg, char *buf, size_t len)
{
	struct upload *u = arg;
	if (u->pos >= u->size)
		return 0;
	if ((off_t)len > u->size - u->pos)
		len = (size_t)(u->size - u->pos);
	for (;;) {
		ssize_t n = pread(u->fd, buf, len, u->pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the file shrank under us */
		u->pos += n;
		return n;
	}
}

int e2b_write_file(struct sb_backend *b, struct sb_upload *file)
{
	const char *path = file->path;
	int fd = file->fd;
	off_t size = file->size;
	mode_t mode = file->mode;
	struct e2b *e = b->priv;
	char *q = http_query_escape(path);
	if (!q)
		return -ENOMEM;
	char *p = NULL;
	int rc = asprintf(&p, "/files?path=%s%s%s", q, e->user[0] ? "&username=" : "",
			  e->user);
	free(q);
	if (rc < 0)
		return -ENOMEM;
	for (int attempt = 1;; attempt++) {
		struct upload u = {.fd = fd, .size = size};
		struct http_req req = {
			.method = "POST", .path = p,
			.content_type = "application/octet-stream",
			.body_fn = upload_body, .body_arg = &u, .body_size = size,
			.max_response = 1 << 20, .timeout_ms = 0, .stall_ms = 60000,
			.headers = e->envd_hdrs,
		};
		struct http_resp resp;
		rc = http_request(&e->envd, &req, &resp);
		if (rc < 0) {
			sb_debug("e2b: upload %s: %s", path, resp.error);
			if (resp.body_err)
				rc = resp.body_err;
			else if (rc != -ETIMEDOUT && rc != -ENOMEM)
				rc = -ECONNRESET;
		} else if (resp.status == 200 || resp.status == 204) {
			rc = 0;
		} else if (resp.status == 400 && resp.body && strstr(resp.body, "directory")) {
			rc = -EISDIR;
		} else {
			rc = e2b_envd_status(b, resp.status, resp.body, resp.len, "upload");
		}
		http_resp_free(&resp);
		if (rc == -EAGAIN && attempt < 5) {
			usleep(200000u * (unsigned)attempt);
			continue;
		}
		if (rc == -EAGAIN)
			rc = -EIO;
		break;
	}
	free(p);
	if (rc == 0)
		atomic_fetch_add(&b->counters.bytes_up, (uint64_t)size);
	/* the upload makes files 0666 & umask; any other mode is the shell's */
	if (rc == 0 && (mode & 07777) != UPLOAD_MODE_DEFAULT)
		rc = shell_chmod(b, path, mode & 07777);
	return rc;
}

static json_t *path_req(const char *path)
{
	return json_pack("{s:s}", "path", path);
}

int e2b_list_dir(struct sb_backend *b, const char *path, struct sb_dirlist *out)
{
	if (!exec_utf8_valid(path))
		return shell_list_dir(b, path, out);
	json_t *req = json_pack("{s:s,s:i}", "path", path, "depth", 1), *resp = NULL;
	int rc = e2b_rpc(b, "filesystem.Filesystem/ListDir", req, &resp);
	json_decref(req);
	if (rc == -EINVAL)
		rc = -ENOTDIR; /* invalid_argument: the path is not a directory */
	if (rc < 0)
		return rc;
	struct e2b_ids ids = ids_of(b);
	json_t *entries = json_object_get(resp, "entries");
	if (entries && !json_is_array(entries))
		rc = -EPROTO;
	size_t i;
	json_t *ent;
	json_array_foreach(entries, i, ent) {
		struct stat st;
		const char *name;
		if (e2b_parse_entry(ent, &ids, &st, &name) < 0) {
			rc = -EPROTO;
			break;
		}
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		/* envd's JSON turns a name that is not UTF-8 into U+FFFD: such
		 * a directory is listed by the shell, which keeps the bytes */
		if (strstr(name, "\xef\xbf\xbd")) {
			rc = -EILSEQ;
			break;
		}
		struct sb_dirent *d = sb_dirlist_add(out, name);
		if (!d) {
			rc = -ENOMEM;
			break;
		}
		d->st = st;
		/* envd gives the resolved target, not the link's text: the fs
		 * core asks readlink when it needs it */
		d->link_target = NULL;
	}
	json_decref(resp);
	if (rc == -EILSEQ) {
		sb_dirlist_free(out);
		return shell_list_dir(b, path, out);
	}
	if (rc == -EPROTO)
		sb_warn("e2b: malformed ListDir answer for %s", path);
	return rc;
}

int e2b_stat(struct sb_backend *b, const char *path, struct stat *st,
	     char **link_target)
{
	if (link_target)
		*link_target = NULL;
	if (!exec_utf8_valid(path))
		return shell_stat(b, path, st, link_target);
	json_t *req = path_req(path), *resp = NULL;
	int rc = e2b_rpc(b, "filesystem.Filesystem/Stat", req, &resp);
	json_decref(req);
	if (rc < 0)
		return rc;
	struct e2b_ids ids = ids_of(b);
	rc = e2b_parse_entry(json_object_get(resp, "entry"), &ids, st, NULL);
	json_decref(resp);
	/* an owner named by a user name only the guest's passwd maps: the
	 * shell's stat tells the number */
	if (rc == 0 && (st->st_uid == SB_ID_UNTOLD || st->st_gid == SB_ID_UNTOLD))
		return shell_stat(b, path, st, link_target);
	return rc;
}

int e2b_mkdir(struct sb_backend *b, const char *path, mode_t mode)
{
	if (!exec_utf8_valid(path))
		return shell_mkdir(b, path, mode);
	json_t *req = path_req(path);
	int rc = e2b_rpc(b, "filesystem.Filesystem/MakeDir", req, NULL);
	json_decref(req);
	if (rc == -EINVAL)
		rc = -EEXIST; /* invalid_argument: a non-directory is there */
	/* MakeDir has no mode: it makes 0755 */
	if (rc == 0 && (mode & 07777) != MKDIR_MODE_DEFAULT)
		rc = shell_chmod(b, path, mode & 07777);
	return rc;
}

int e2b_remove(struct sb_backend *b, const char *path, bool is_dir)
{
	/* Remove is RemoveAll: it would empty a directory rmdir must refuse */
	if (is_dir || !exec_utf8_valid(path))
		return shell_remove(b, path, is_dir);
	json_t *req = path_req(path);
	int rc = e2b_rpc(b, "filesystem.Filesystem/Remove", req, NULL);
	json_decref(req);
	return rc;
}

int e2b_rename(struct sb_backend *b, const char *from, const char *to,
	       bool noreplace)
{
	/* Move replaces what is there (os.Rename) and cannot be told not to */
	if (noreplace || !exec_utf8_valid(from) || !exec_utf8_valid(to))
		return shell_rename(b, from, to, noreplace);
	json_t *req = json_pack("{s:s,s:s}", "source", from, "destination", to);
	int rc = e2b_rpc(b, "filesystem.Filesystem/Move", req, NULL);
	json_decref(req);
	/* internal: os.Rename's own error in words, which the shell's mv
	 * reports as errno (EXDEV, ENOTEMPTY, EISDIR, ...) */
	if (rc == -EIO && !sb_backend_is_dead(b))
		rc = shell_rename(b, from, to, noreplace);
	return rc;
}
