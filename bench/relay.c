/*
 * relay - the smallest CONNECT relay we could write (not part of airlock).
 *
 * DOC: Theory of Operation
 * A reference for bench (a) only: it shows what any userspace relay can
 * reach on this machine, so that a proxy's bulk number can be read against
 * both the direct connection and the physical ceiling of one extra TCP
 * hop. No policy, no logging, no limits, no error answers: a thread per
 * connection, a blocking thread per direction, and either read()/write()
 * through a buffer of CHUNK bytes ("copy") or splice() through a pipe of
 * CHUNK bytes ("splice"). Never use it for anything else.
 *
 *   relay ADDR:PORT copy|splice CHUNK
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int use_splice;
static size_t chunk;

struct pump {
	int from, to;
};

static void *pump(void *arg)
{
	struct pump *p = arg;
	char *buf = NULL;
	int pp[2] = { -1, -1 };

	if (use_splice) {
		if (pipe(pp) < 0)
			goto out;
		fcntl(pp[1], F_SETPIPE_SZ, (int)chunk);
	} else if ((buf = malloc(chunk)) == NULL) {
		goto out;
	}
	for (;;) {
		ssize_t n, m;
		if (use_splice) {
			n = splice(p->from, NULL, pp[1], NULL, chunk, SPLICE_F_MOVE);
			if (n <= 0)
				break;
			for (; n > 0; n -= m) {
				m = splice(pp[0], NULL, p->to, NULL, (size_t)n,
					   SPLICE_F_MOVE);
				if (m <= 0)
					goto out;
			}
		} else {
			n = read(p->from, buf, chunk);
			if (n <= 0)
				break;
			for (ssize_t o = 0; o < n; o += m) {
				m = write(p->to, buf + o, (size_t)(n - o));
				if (m <= 0)
					goto out;
			}
		}
	}
out:
	shutdown(p->to, SHUT_WR);
	free(buf);
	if (pp[0] >= 0) {
		close(pp[0]);
		close(pp[1]);
	}
	return NULL;
}

static void *serve(void *arg)
{
	int c = (int)(long)arg, u = -1, port = 0;
	char head[1024], host[64];
	size_t n = 0;

	/* The head, a byte at a time: the client speaks next, after 200. */
	while (n < 4 || memcmp(head + n - 4, "\r\n\r\n", 4) != 0) {
		if (n == sizeof(head) - 1 || read(c, head + n, 1) != 1)
			goto out;
		n++;
	}
	head[n] = '\0';
	if (sscanf(head, "CONNECT %63[^:]:%d", host, &port) != 2)
		goto out;
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
		goto out;
	u = socket(AF_INET, SOCK_STREAM, 0);
	if (u < 0 || connect(u, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		goto out;
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	if (write(c, ok, sizeof(ok) - 1) != (ssize_t)sizeof(ok) - 1)
		goto out;
	struct pump up = { c, u }, down = { u, c };
	pthread_t t;
	if (pthread_create(&t, NULL, pump, &up) != 0)
		goto out;
	pump(&down);
	pthread_join(t, NULL);
out:
	if (u >= 0)
		close(u);
	close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char host[64];
	int port, one = 1;

	if (argc != 4 || sscanf(argv[1], "%63[^:]:%d", host, &port) != 2 ||
	    inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
		fprintf(stderr, "usage: relay ADDR:PORT copy|splice CHUNK\n");
		return 2;
	}
	use_splice = strcmp(argv[2], "splice") == 0;
	chunk = strtoul(argv[3], NULL, 0);
	sin.sin_port = htons((uint16_t)port);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(l, 128) < 0) {
		perror("relay");
		return 1;
	}
	for (;;) {
		int c = accept(l, NULL, NULL);
		pthread_t t;
		if (c < 0)
			continue;
		if (pthread_create(&t, NULL, serve, (void *)(long)c) != 0)
			close(c);
		else
			pthread_detach(t);
	}
}
