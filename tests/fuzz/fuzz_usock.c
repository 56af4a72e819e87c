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
