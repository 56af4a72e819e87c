/* SPDX-License-Identifier: Apache-2.0
 * fuzz_usock.c - libFuzzer target for the parsers of the unix-socket gate
 * (usock.c) that read bytes the agent chose - an AF_UNIX address and the
 * control messages of its sendmsg() - and the NETLINK_SOCK_DIAG scanner.
 * The first byte picks which; the rest is the input.
 *
 * Invariants, checked with abort():
 *  - addresses: the kind is one of the enum's; a path is non-empty, at
 *    most 108 bytes, and a prefix of the bytes after the family, ending
 *    at the first NUL or the address's end;
 *  - control messages: the walker answers 0 or -EINVAL, never more than
 *    253 descriptors, each of them read from the input; replacing them
 *    changes exactly those bytes, and a second walk finds the new ones;
 *    credentials appended where the gate appends them keep the caller's
 *    bytes before them and are found, after every message, by a walk;
 *  - the diag scanner answers -EPROTO, a negative errno the input holds,
 *    or a combination of found (1) and done (2); found only if the
 *    device and inode asked for occur in the input.
 * ASan checks that none of them reads outside the input.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "usock.h"

static void fuzz_address(const uint8_t *d, size_t n)
{
	char path[USOCK_PATH_MAX + 1];
	enum usock_addr_kind k = usock_addr_classify(d, n, path);
	size_t len;

	CHECK((unsigned)k < USOCK_ADDR_COUNT);
	if (k != USOCK_ADDR_PATH)
		return;
	len = strlen(path);
	CHECK(len > 0 && len <= USOCK_PATH_MAX);
	CHECK(n >= 2 + len && memcmp(path, d + 2, len) == 0);
	CHECK(n == 2 + len || d[2 + len] == '\0');
}

/* Credentials appended where the gate puts them: the kernel's walk of the
 * result finds every message of @ctl's and then them (issue 27). */
static void fuzz_cmsg_append(const uint8_t *ctl, size_t n, const struct usock_cmsg_scan *s)
{
	unsigned char cred[CMSG_SPACE(sizeof(struct ucred))];
	struct usock_cmsg_scan after;
	struct cmsghdr h;
	uint8_t *buf;
	size_t len;

	CHECK(s->end <= CMSG_ALIGN(n) && s->end % sizeof(size_t) == 0);
	buf = malloc(CMSG_ALIGN(n) + sizeof(cred));
	CHECK(buf);
	memcpy(buf, ctl, n);
	memset(cred, 0, sizeof(cred));
	memset(&h, 0, sizeof(h));
	h.cmsg_len = CMSG_LEN(sizeof(struct ucred));
	h.cmsg_level = SOL_SOCKET;
	h.cmsg_type = SCM_CREDENTIALS;
	memcpy(cred, &h, sizeof(h));
	len = usock_cmsg_append(buf, n, s, cred, sizeof(cred));
	CHECK(len == s->end + sizeof(cred));
	CHECK(memcmp(buf, ctl, s->end < n ? s->end : n) == 0);
	CHECK(usock_cmsg_scan(buf, len, &after) == 0);
	CHECK(after.nfds == s->nfds && after.creds && after.end == len);
	free(buf);
}

static void fuzz_cmsg(const uint8_t *d, size_t n)
{
	struct usock_cmsg_scan s;
	uint8_t *copy, *orig;
	int r;

	copy = malloc(n ? n : 1);
	orig = malloc(n ? n : 1);
	CHECK(copy && orig);
	memcpy(copy, d, n);
	memcpy(orig, d, n);
	r = usock_cmsg_scan(copy, n, &s);
	CHECK(r == 0 || r == -EINVAL);
	if (r == 0) {
		struct usock_cmsg_scan again;
		int fds[USOCK_CMSG_FDS_MAX];
		size_t i, changed = 0;

		CHECK(s.nfds <= USOCK_CMSG_FDS_MAX);
		for (i = 0; i < s.nfds; i++)
			fds[i] = s.fds[i] == 0x7eadbeef ? 0x7eadbeee : 0x7eadbeef;
		usock_cmsg_replace_fds(copy, n, fds, s.nfds);
		CHECK(usock_cmsg_scan(copy, n, &again) == 0 && again.nfds == s.nfds);
		for (i = 0; i < s.nfds; i++)
			CHECK(again.fds[i] == fds[i]);
		for (i = 0; i < n; i++)
			changed += copy[i] != orig[i];
		CHECK(changed <= s.nfds * sizeof(int));
		fuzz_cmsg_append(copy, n, &s);
	}
	free(copy);
	free(orig);
}

static void fuzz_diag(const uint8_t *d, size_t n)
{
	uint32_t kdev = 0x00800001, ino = 0x1234;
	uint8_t needle[4];
	int r;

	memcpy(needle, &ino, sizeof(needle));
	r = usock_diag_scan(d, n, kdev, ino);
	CHECK(r >= -4095 && r <= 3);
	if (r > 0 && (r & 1))
		CHECK(memmem(d, n, needle, sizeof(needle)) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0:
		fuzz_address(data + 1, size - 1);
		break;
	case 1:
		fuzz_cmsg(data + 1, size - 1);
		break;
	default:
		fuzz_diag(data + 1, size - 1);
		break;
	}
	return 0;
}
