/* The control frame decoder under random, truncated and oversized input
 * (deterministic seed, so a failure reproduces): every read ends in a whole
 * frame within the size cap, a clean end, or -EPROTO; never a crash, a
 * hang or an allocation the header alone asked for. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/frame.h"
#include "tests/unit/unit.h"

#define ROUNDS 3000
#define STREAM_MAX 4096

/* xorshift64*: deterministic, good enough to shake a parser */
static uint32_t next_of(uint64_t *r)
{
	*r ^= *r >> 12;
	*r ^= *r << 25;
	*r ^= *r >> 27;
	return (uint32_t)((*r * 0x2545f4914f6cdd1dull) >> 32);
}

static uint64_t rng = 0x5eedf00dcafe1234ull;

static uint32_t next(void) { return next_of(&rng); }

static void header(unsigned char *h, uint32_t total, unsigned char type)
{
	h[0] = (unsigned char)(total >> 24);
	h[1] = (unsigned char)(total >> 16);
	h[2] = (unsigned char)(total >> 8);
	h[3] = (unsigned char)total;
	h[4] = type;
}

/* Builds one hostile stream: random bytes, or frames whose lengths lie
 * (too big, zero, past the cap, longer than what follows). */
static size_t make_stream(unsigned char *s)
{
	size_t n = 0;
	switch (next() % 4) {
	case 0: /* pure noise */
		n = next() % STREAM_MAX;
		for (size_t i = 0; i < n; i++)
			s[i] = (unsigned char)next();
		break;
	case 1: /* a few good frames, then one truncated at a random point */
		while (n + 64 < STREAM_MAX && next() % 4) {
			uint32_t len = next() % 40;
			header(s + n, len + 1, (unsigned char)next());
			n += 5;
			for (uint32_t i = 0; i < len; i++)
				s[n++] = (unsigned char)next();
		}
		header(s + n, 1 + 100 + next() % 1000, 'O');
		n += 5 + next() % 100;
		break;
	case 2: { /* lengths around and past the cap */
		static const uint32_t lens[] = {0, 1, FRAME_MAX_PAYLOAD,
						FRAME_MAX_PAYLOAD + 1,
						FRAME_MAX_PAYLOAD + 2, 0x7fffffffu,
						0x80000000u, 0xffffffffu};
		header(s, lens[next() % 8], (unsigned char)next());
		n = 5 + next() % 64;
		break;
	}
	default: /* a header cut short */
		n = next() % 5;
		for (size_t i = 0; i < n; i++)
			s[i] = (unsigned char)next();
		break;
	}
	return n;
}

struct feed {
	uint64_t rng; /* the feeder's own, so the main one stays in step */
	int fd;
	const unsigned char *p;
	size_t n;
};

static void *feed_main(void *arg)
{
	struct feed *f = arg;
	size_t off = 0;
	/* in random-sized pieces, so the reader sees short reads */
	while (off < f->n) {
		size_t k = 1 + next_of(&f->rng) % 97;
		if (k > f->n - off)
			k = f->n - off;
		ssize_t w = write(f->fd, f->p + off, k);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	close(f->fd);
	return NULL;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	static unsigned char stream[STREAM_MAX + 2048];
	unsigned long frames = 0, protos = 0, ends = 0, bytes_in = 0;
	for (int round = 0; round < ROUNDS; round++) {
		size_t n = make_stream(stream);
		bytes_in += n;
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
			perror("socketpair");
			return 2;
		}
		struct feed f = {rng ^ (uint64_t)round << 32, sv[0], stream, n};
		pthread_t t;
		pthread_create(&t, NULL, feed_main, &f);
		size_t consumed = 0;
		for (int k = 0; k < 2000; k++) {
			struct frame fr;
			int rc = frame_read(sv[1], &fr);
			if (rc == 1) {
				frames++;
				CHECK(fr.len <= FRAME_MAX_PAYLOAD);
				CHECK((fr.len == 0) == (fr.data == NULL));
				if (fr.data)
					CHECK(fr.data[fr.len] == '\0');
				consumed += 5 + fr.len;
				CHECK(consumed <= n);
				frame_free(&fr);
				continue;
			}
			if (rc == 0) {
				ends++;
				CHECK(consumed == n); /* a clean end only on a boundary */
			} else {
				protos++;
				CHECK_INT(rc, -EPROTO);
				CHECK(fr.data == NULL);
			}
			break;
		}
		pthread_join(t, NULL);
		close(sv[1]);
	}
	fprintf(stderr, "  %d streams, %lu bytes: %lu frames decoded, %lu refused, %lu clean ends\n",
		ROUNDS, bytes_in, frames, protos, ends);
	CHECK(frames > 0 && protos > 0 && ends > 0);
	return unit_done("frame_fuzz");
}
