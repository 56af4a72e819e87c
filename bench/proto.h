/*
 * proto.h - the benchmark's request format, shared by load.c and
 * upstream.c (not part of airlock).
 *
 * A request is a fixed 32-byte header followed by padding:
 *   "R " <resp: 16 hex digits> " " <total: 8 hex digits> "  ...  \n"
 * total (>= 32) is the whole request length including the header; the
 * server answers with exactly resp bytes. The header is plain text, so a
 * proxy that inspects the first flight sees a non-TLS protocol.
 */
#ifndef BENCH_PROTO_H
#define BENCH_PROTO_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROTO_HDR 32

static inline void proto_format(char out[PROTO_HDR], uint64_t resp,
				uint32_t total)
{
	char tmp[PROTO_HDR + 8];
	int n = snprintf(tmp, sizeof(tmp), "R %016llx %08x",
			 (unsigned long long)resp, (unsigned)total);
	memset(out, ' ', PROTO_HDR);
	memcpy(out, tmp, (size_t)n);
	out[PROTO_HDR - 1] = '\n';
}

/* Returns 0 and fills resp/total, or -1 on a malformed header. */
static inline int proto_parse(const char in[PROTO_HDR], uint64_t *resp,
			      uint64_t *total)
{
	char tmp[PROTO_HDR + 1];
	if (in[0] != 'R' || in[1] != ' ' || in[PROTO_HDR - 1] != '\n')
		return -1;
	memcpy(tmp, in, PROTO_HDR);
	tmp[PROTO_HDR] = '\0';
	char *end;
	*resp = strtoull(tmp + 2, &end, 16);
	if (end != tmp + 18)
		return -1;
	*total = strtoull(tmp + 19, &end, 16);
	if (end != tmp + 27 || *total < PROTO_HDR)
		return -1;
	return 0;
}

#endif
