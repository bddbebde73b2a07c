#include "wb_removes_queue.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A path of the set with how many entries name it (a name removed, made
 * again and removed again before a drain is two entries). */
struct rmq_slot {
	struct rmq_slot *next;
	size_t count;
	size_t len;
	char path[];
};

static uint64_t hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

void rmq_init(struct rmq *q)
{
	memset(q, 0, sizeof *q);
}

void rmq_free(struct rmq *q)
{
	for (size_t i = q->head; i < q->n; i++)
		free(q->v[i].path);
	free(q->v);
	for (size_t i = 0; i < q->nbuckets; i++) {
		struct rmq_slot *s = q->buckets[i], *next;
		for (; s; s = next) {
			next = s->next;
			free(s);
		}
	}
	free(q->buckets);
	free(q->files);
	memset(q, 0, sizeof *q);
}

static struct rmq_slot **find(const struct rmq *q, const char *path, size_t len)
{
	if (!q->nbuckets)
		return NULL;
	struct rmq_slot **s = &q->buckets[hash(path, len) % q->nbuckets];
	for (; *s; s = &(*s)->next)
		if ((*s)->len == len && memcmp((*s)->path, path, len) == 0)
			return s;
	return s;
}

static int grow_set(struct rmq *q)
{
	if (q->nset < q->nbuckets)
		return 0;
	size_t nb = q->nbuckets ? q->nbuckets * 2 : 64;
	struct rmq_slot **b = calloc(nb, sizeof *b);
	if (!b)
		return q->nbuckets ? 0 : -ENOMEM; /* fuller chains still work */
	for (size_t i = 0; i < q->nbuckets; i++) {
		struct rmq_slot *s = q->buckets[i], *next;
		for (; s; s = next) {
			next = s->next;
			size_t h = hash(s->path, s->len) % nb;
			s->next = b[h];
			b[h] = s;
		}
	}
	free(q->buckets);
	q->buckets = b;
	q->nbuckets = nb;
	return 0;
}

static int set_add(struct rmq *q, const char *path)
{
	size_t len = strlen(path);
	if (grow_set(q) < 0)
		return -ENOMEM;
	struct rmq_slot **s = find(q, path, len);
	if (*s) {
		(*s)->count++;
		return 0;
	}
	struct rmq_slot *n = malloc(sizeof *n + len + 1);
	if (!n)
		return -ENOMEM;
	n->next = NULL;
	n->count = 1;
	n->len = len;
	memcpy(n->path, path, len + 1);
	*s = n;
	q->nset++;
	return 0;
}

static void set_drop(struct rmq *q, const char *path)
{
	struct rmq_slot **s = find(q, path, strlen(path));
	if (!s || !*s || --(*s)->count > 0)
		return;
	struct rmq_slot *dead = *s;
	*s = dead->next;
	free(dead);
	q->nset--;
}

/* The set also counts, for each directory removal, its parent and its
 * grandparent under keys of their own (a tag byte before the path; no
 * path starts so): a stat of the parent, or a listing of the
 * grandparent, shows a link count that removal changes. A mkdir's path,
 * its parent and its grandparent have keys of other tags. */
enum key_tag {
	TAG_REMOVED_IN = 1,      /* 1 or 2: levels above a directory removed */
	TAG_MADE = 3,            /* 3, 4, 5: a mkdir's path, 1 and 2 levels up */
};

/* The key of path's ancestor levels up (0: path itself) under tag, or
 * NULL when there is no such ancestor, or no memory. */
static char *tagged_key(const char *path, int levels, int tag)
{
	size_t len = strlen(path);
	for (int i = 0; i < levels; i++) {
		while (len > 0 && path[len - 1] != '/')
			len--;
		if (len == 0)
			return NULL;
		len--; /* the slash */
	}
	char *k = malloc(len + 3);
	if (!k)
		return NULL;
	k[0] = (char)tag;
	if (len == 0)
		memcpy(k + 1, "/", 2);
	else {
		memcpy(k + 1, path, len);
		k[len + 1] = '\0';
	}
	return k;
}

/* Adds (or, with drop, removes) the keys of path from level first to
 * last, each under tag + level - first. */
static int keys_update(struct rmq *q, const char *path, int first, int last,
		       int tag, bool drop)
{
	for (int levels = first; levels <= last; levels++) {
		char *k = tagged_key(path, levels, tag + levels - first);
		if (!k)
			return 0;
		int rc = 0;
		if (drop)
			set_drop(q, k);
		else
			rc = set_add(q, k);
		free(k);
		if (rc < 0) {
			if (levels > first)
				keys_update(q, path, first, levels - 1, tag, true);
			return rc;
		}
	}
	return 0;
}

static int ancestors_update(struct rmq *q, const char *path, bool drop)
{
	return keys_update(q, path, 1, 2, TAG_REMOVED_IN, drop);
}

static int made_update(struct rmq *q, const char *path, bool drop)
{
	return keys_update(q, path, 0, 2, TAG_MADE, drop);
}

static int push(struct rmq *q, const char *path, bool is_dir, bool make,
		mode_t mode, struct rmq_file file)
{
	if (file.ino && q->nfiles == q->files_cap) {
		size_t cap = q->files_cap ? q->files_cap * 2 : 8;
		struct rmq_file *f = realloc(q->files, cap * sizeof *f);
		if (!f)
			return -ENOMEM;
		q->files = f;
		q->files_cap = cap;
	}
	if (q->head > 0 && q->head == q->n)
		q->head = q->n = 0;
	if (q->n == q->cap) {
		if (q->head > 0) {
			memmove(q->v, q->v + q->head, (q->n - q->head) * sizeof *q->v);
			q->n -= q->head;
			q->head = 0;
		}
		if (q->n == q->cap) {
			size_t cap = q->cap ? q->cap * 2 : 256;
			struct rmq_entry *v = realloc(q->v, cap * sizeof *v);
			if (!v)
				return -ENOMEM;
			q->v = v;
			q->cap = cap;
		}
	}
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	if (make) {
		if (made_update(q, path, false) < 0) {
			free(copy);
			return -ENOMEM;
		}
		q->nmade++;
	} else if (set_add(q, path) < 0) {
		free(copy);
		return -ENOMEM;
	} else if (is_dir && ancestors_update(q, path, false) < 0) {
		set_drop(q, path);
		free(copy);
		return -ENOMEM;
	}
	q->v[q->n++] = (struct rmq_entry){.path = copy, .is_dir = is_dir,
					  .make = make, .mode = mode, .file = file};
	q->pending_bytes += strlen(path);
	if (file.ino)
		q->files[q->nfiles++] = file;
	return 0;
}

int rmq_push(struct rmq *q, const char *path, bool is_dir)
{
	return push(q, path, is_dir, false, 0, (struct rmq_file){0});
}

int rmq_push_linked(struct rmq *q, const char *path, struct rmq_file file)
{
	return push(q, path, false, false, 0, file);
}

int rmq_push_mkdir(struct rmq *q, const char *path, mode_t mode)
{
	return push(q, path, true, true, mode, (struct rmq_file){0});
}

static void files_drop(struct rmq *q, struct rmq_file file)
{
	for (size_t i = 0; i < q->nfiles; i++) {
		if (q->files[i].dev == file.dev && q->files[i].ino == file.ino) {
			q->files[i] = q->files[--q->nfiles];
			return;
		}
	}
}

size_t rmq_pending(const struct rmq *q)
{
	return q->n - q->head;
}

size_t rmq_take(struct rmq *q, size_t max, size_t max_bytes,
		struct rmq_entry **out)
{
	size_t k = 0, bytes = 0;
	while (k < max && q->head + k < q->n) {
		size_t l = strlen(q->v[q->head + k].path);
		if (k > 0 && bytes + l > max_bytes)
			break;
		bytes += l;
		k++;
	}
	*out = NULL;
	if (k == 0)
		return 0;
	struct rmq_entry *v = malloc(k * sizeof *v);
	if (!v)
		return 0;
	memcpy(v, q->v + q->head, k * sizeof *v);
	q->head += k;
	q->pending_bytes -= bytes;
	*out = v;
	return k;
}

void rmq_done(struct rmq *q, struct rmq_entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i].make) {
			made_update(q, v[i].path, true);
			q->nmade--;
		} else {
			set_drop(q, v[i].path);
			if (v[i].is_dir)
				ancestors_update(q, v[i].path, true);
		}
		if (v[i].file.ino)
			files_drop(q, v[i].file);
		free(v[i].path);
	}
	free(v);
}

static bool in_set(const struct rmq *q, const char *path, size_t len)
{
	struct rmq_slot **s = find(q, path, len);
	return s && *s;
}

/* Whether key (skip bytes of tag, then a path) or the key of one of the
 * path's ancestors is in the set: the path itself, then "/a/b/c": "/a/b",
 * "/a". */
static bool key_or_ancestor_in_set(const struct rmq *q, const char *key, size_t skip)
{
	const char *path = key + skip;
	size_t len = strlen(path);
	for (size_t l = len; l > 0; l--)
		if ((l == len || path[l] == '/') && in_set(q, key, skip + l))
			return true;
	return false;
}

/* Whether the key of path or of one of its ancestors, under tag, is in
 * the set. */
static bool covered(const struct rmq *q, const char *path, int tag)
{
	size_t len = strlen(path);
	char stackbuf[1024];
	char *k = len + 2 <= sizeof stackbuf ? stackbuf : malloc(len + 2);
	if (!k)
		return true; /* no memory: as if covered (the queue lands) */
	k[0] = (char)tag;
	memcpy(k + 1, path, len + 1);
	bool hit = key_or_ancestor_in_set(q, k, 1);
	if (k != stackbuf)
		free(k);
	return hit;
}

bool rmq_made(const struct rmq *q, const char *path)
{
	return q->nmade > 0 && path && covered(q, path, TAG_MADE);
}

/* Whether the key of dir under tag is in the set. */
static bool has_key(const struct rmq *q, const char *dir, int tag)
{
	size_t dl = strlen(dir);
	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	char stackbuf[1024];
	char *k = dl + 2 <= sizeof stackbuf ? stackbuf : malloc(dl + 2);
	if (!k)
		return false;
	k[0] = (char)tag;
	memcpy(k + 1, dir, dl);
	k[dl + 1] = '\0';
	bool r = in_set(q, k, dl + 1);
	if (k != stackbuf)
		free(k);
	return r;
}

bool rmq_gone(const struct rmq *q, const char *path)
{
	if (q->nset == 0 || !path)
		return false;
	/* made again after (or before) its remove: only the sandbox, once
	 * the queue has landed, tells which came last */
	if (rmq_made(q, path))
		return false;
	return key_or_ancestor_in_set(q, path, 0);
}

bool rmq_gone_in(const struct rmq *q, const char *dir, const char *name)
{
	if (q->nset == 0)
		return false;
	size_t dl = strlen(dir), nl = strlen(name);
	while (dl > 0 && dir[dl - 1] == '/')
		dl--;
	char stackbuf[1024];
	char *buf = dl + nl + 2 <= sizeof stackbuf ? stackbuf : malloc(dl + nl + 2);
	if (!buf)
		return false;
	memcpy(buf, dir, dl);
	buf[dl] = '/';
	memcpy(buf + dl + 1, name, nl + 1);
	bool r = rmq_gone(q, buf);
	if (buf != stackbuf)
		free(buf);
	return r;
}

bool rmq_dir_removed_below(const struct rmq *q, const char *dir, int levels)
{
	if (q->nset == 0 || levels < 1 || levels > 2)
		return false;
	return has_key(q, dir, TAG_REMOVED_IN + levels - 1);
}

bool rmq_names_file(const struct rmq *q, struct rmq_file file)
{
	for (size_t i = 0; i < q->nfiles; i++)
		if (q->files[i].dev == file.dev && q->files[i].ino == file.ino)
			return true;
	return false;
}

bool rmq_call_waits(const struct rmq *q, enum sb_call kind, const char *path,
		    const char *to)
{
	if (q->nmade > 0) {
		if (rmq_made(q, path) || rmq_made(q, to))
			return true;
		if ((kind == SB_CALL_STAT || kind == SB_CALL_LIST) && path &&
		    has_key(q, path, TAG_MADE + 1))
			return true;
		if (kind == SB_CALL_LIST && path && has_key(q, path, TAG_MADE + 2))
			return true;
	}
	switch (kind) {
	case SB_CALL_STAT:
		return q->nfiles > 0 || (path && rmq_dir_removed_below(q, path, 1));
	case SB_CALL_LIST:
		return q->nfiles > 0 || (path && rmq_dir_removed_below(q, path, 2));
	case SB_CALL_WRITE: case SB_CALL_MKDIR: case SB_CALL_CHMOD:
	case SB_CALL_TRUNCATE: case SB_CALL_UTIMENS: case SB_CALL_CHOWN:
	case SB_CALL_READ: case SB_CALL_READLINK:
		return !path || rmq_gone(q, path);
	case SB_CALL_SYMLINK: case SB_CALL_LINK:
		return !to || rmq_gone(q, to);
	default:
		return true;
	}
}
