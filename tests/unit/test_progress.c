#include "control/progress.h"
#include "unit.h"

static void sample_of(const char *json, double t, struct progress_sample *s)
{
	json_t *st = json_loads(json, 0, NULL);
	CHECK(st != NULL);
	progress_sample(st, t, s);
	json_decref(st);
}

int main(void)
{
	struct progress_sample a, b;
	char line[256];
	/* queued and uploading both count as pending */
	sample_of("{\"bytes_up\": 1000, \"writeback\": {\"queued\": 3, \"queued_bytes\": 3145728,"
		  " \"in_flight\": 1, \"in_flight_bytes\": 1048576, \"failed\": 0}}", 10.0, &a);
	CHECK_INT(a.files, 4);
	CHECK_INT(a.bytes, 4194304);
	CHECK_INT(a.bytes_up, 1000);
	progress_format(NULL, &a, line, sizeof line);
	CHECK(!strcmp(line, "4 files pending, 4.0 MiB"));
	/* 2 MiB went up in 2 s: 1 MiB/s, 2 MiB left: 2 s */
	sample_of("{\"bytes_up\": 2098152, \"writeback\": {\"queued\": 1, \"queued_bytes\": 1048576,"
		  " \"in_flight\": 1, \"in_flight_bytes\": 1048576, \"failed\": 2}}", 12.0, &b);
	progress_format(&a, &b, line, sizeof line);
	CHECK(!strcmp(line, "2 files pending, 2.0 MiB; 1.0 MiB/s, about 2 s left; "
			    "2 failed (sbfs status names them)"));
	/* nothing moved: no rate, no guess */
	progress_format(&b, &b, line, sizeof line);
	CHECK(strstr(line, "waiting") == NULL); /* no time passed: no rate at all */
	struct progress_sample c = b;
	c.t += 1;
	progress_format(&b, &c, line, sizeof line);
	CHECK(strstr(line, "; waiting for the sandbox") != NULL);
	/* done */
	sample_of("{\"bytes_up\": 5000000, \"writeback\": {\"queued\": 0, \"queued_bytes\": 0,"
		  " \"in_flight\": 0, \"in_flight_bytes\": 0, \"failed\": 0}}", 13.0, &c);
	progress_format(&b, &c, line, sizeof line);
	CHECK(!strcmp(line, "nothing pending: every write is uploaded"));
	/* one file, small: singular, bytes */
	sample_of("{\"writeback\": {\"queued\": 1, \"queued_bytes\": 12}}", 1.0, &c);
	progress_format(NULL, &c, line, sizeof line);
	CHECK(!strcmp(line, "1 file pending, 12 B"));
	/* a mount without write-back has no such object: nothing pending */
	sample_of("{\"bytes_up\": 7}", 1.0, &c);
	CHECK_INT(c.files, 0);
	return unit_done("progress");
}
