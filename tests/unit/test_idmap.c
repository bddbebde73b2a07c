/* Ownership codecs: -o idmap (fs_map_attr / fs_unmap_owner) and the local
 * backend's sandbox <-> host id range (id_map_*). */
#include "backends/local/local_userns.h"
#include "fs/core/fs_internal.h"
#include "unit.h"

#include <string.h>

static struct sb_backend backend;
static struct fs fs;

/* A mount by uid 1000 of a sandbox whose own user is root. */
static void setup(bool idmap_none)
{
	memset(&backend, 0, sizeof backend);
	memset(&fs, 0, sizeof fs);
	backend.guest_uid = 0;
	backend.guest_gid = 0;
	fs.b = &backend;
	fs.uid = 1000;
	fs.gid = 1001;
	fs.cfg.idmap_none = idmap_none;
}

static struct stat owned(uid_t uid, gid_t gid)
{
	struct stat st;
	memset(&st, 0, sizeof st);
	st.st_mode = S_IFREG | 0644;
	st.st_nlink = 1;
	st.st_uid = uid;
	st.st_gid = gid;
	return st;
}

static void test_idmap_user(void)
{
	setup(false);
	struct stat st = owned(0, 0);
	fs_map_attr(&fs, &st);
	CHECK_INT(st.st_uid, 1000); /* the sandbox's user shows as the mounter */
	CHECK_INT(st.st_gid, 1001);
	st = owned(1234, 0);
	fs_map_attr(&fs, &st);
	CHECK_INT(st.st_uid, 1234); /* others as they are */
	CHECK_INT(st.st_gid, 1001);
	uid_t u = 1000;
	gid_t g = 1001;
	fs_unmap_owner(&fs, &u, &g);
	CHECK_INT(u, 0); /* a chown to the mounter is to the sandbox's user */
	CHECK_INT(g, 0);
	u = 1234;
	g = (gid_t)-1;
	fs_unmap_owner(&fs, &u, &g);
	CHECK_INT(u, 1234);
	CHECK(g == (gid_t)-1); /* "unchanged" stays */
}

static void test_idmap_none(void)
{
	setup(true);
	struct stat st = owned(0, 0);
	fs_map_attr(&fs, &st);
	CHECK_INT(st.st_uid, 0);
	CHECK_INT(st.st_gid, 0);
	uid_t u = 1000;
	gid_t g = 1001;
	fs_unmap_owner(&fs, &u, &g);
	CHECK_INT(u, 1000);
	CHECK_INT(g, 1001);
}

static void test_host_range(void)
{
	struct id_map m = {.mapped = true, .uid_base = 100000,
			   .gid_base = 200000, .count = 65536};
	CHECK_INT(id_map_uid_host(&m, 0), 100000);
	CHECK_INT(id_map_uid_host(&m, 65535), 165535);
	CHECK(id_map_uid_host(&m, 65536) == (uid_t)-1); /* outside: no host id */
	CHECK(id_map_uid_host(&m, (uid_t)-1) == (uid_t)-1);
	CHECK_INT(id_map_gid_host(&m, 5), 200005);
	CHECK_INT(id_map_uid_guest(&m, 100007), 7);
	CHECK_INT(id_map_uid_guest(&m, 0), 65534);      /* host root: overflow */
	CHECK_INT(id_map_uid_guest(&m, 165536), 65534);
	CHECK_INT(id_map_gid_guest(&m, 199999), 65534);
	CHECK_INT(id_map_gid_guest(&m, 265535), 65535);
	struct id_map none = {.mapped = false};
	CHECK_INT(id_map_uid_host(&none, 42), 42);
	CHECK_INT(id_map_uid_guest(&none, 42), 42);
}

int main(void)
{
	test_idmap_user();
	test_idmap_none();
	test_host_range();
	return unit_done("idmap");
}
