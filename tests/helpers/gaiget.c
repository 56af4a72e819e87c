/* SPDX-License-Identifier: Apache-2.0
 * gaiget - a client that knows nothing of proxies: resolves HOST with
 * getaddrinfo(), connects to the first answer with connect() and sends
 * one HTTP/1.1 GET, as a Go or Rust binary would. Used by the
 * transparent mode tests from inside the sandbox.
 *
 *   gaiget HOST PORT PATH
 *
 * Prints "addr ADDRESS" and then the response's status line and body
 * (exit 0), or one line "ERR WHERE: REASON" (exit 1). Every wait is
 * bounded: 10 s for the connection and for each read.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct addrinfo hints, *res = NULL;
	char text[INET6_ADDRSTRLEN] = "?", req[1024], buf[4096];
	struct pollfd p;
	int fd, r, n;

	if (argc != 4) {
		fprintf(stderr, "usage: gaiget HOST PORT PATH\n");
		return 2;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	r = getaddrinfo(argv[1], argv[2], &hints, &res);
	if (r != 0) {
		printf("ERR getaddrinfo: %s\n", gai_strerror(r));
		return 1;
	}
	if (res->ai_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, text,
			  sizeof(text));
	else if (res->ai_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)res->ai_addr)->sin6_addr,
			  text, sizeof(text));
	printf("addr %s\n", text);
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
		printf("ERR connect: %s\n", strerror(errno));
		freeaddrinfo(res);
		return 1;
	}
	freeaddrinfo(res);
	n = snprintf(req, sizeof(req),
		     "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
		     argv[3], argv[1]);
	if (n < 0 || (size_t)n >= sizeof(req) || write(fd, req, (size_t)n) != n) {
		printf("ERR write: %s\n", strerror(errno));
		return 1;
	}
	for (;;) {
		ssize_t got;

		p.fd = fd;
		p.events = POLLIN;
		p.revents = 0;
		if (poll(&p, 1, 10000) != 1) {
			printf("ERR read: timed out\n");
			return 1;
		}
		got = read(fd, buf, sizeof(buf));
		if (got < 0) {
			printf("ERR read: %s\n", strerror(errno));
			return 1;
		}
		if (got == 0)
			break;
		fwrite(buf, 1, (size_t)got, stdout);
	}
	close(fd);
	return 0;
}
