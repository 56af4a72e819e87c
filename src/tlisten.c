/* SPDX-License-Identifier: Apache-2.0
 * tlisten.c - the proxy's transparent listener: connections the sandbox's
 * redirect sent to the proxy without the client asking for it.
 *
 * DOC: Theory of Operation
 *
 * In transparent mode (docs/TRANSPARENT.md) every TCP connection the agent
 * makes to an address other than loopback lands on a listener the
 * sandbox's init made, which the workers accept on beside the proxy's own
 * socket. The client believes it is talking to its destination, so the
 * proxy never speaks HTTP to it about the connection itself: it reads the
 * original destination from the kernel (SO_ORIGINAL_DST) and turns the
 * connection into the CONNECT tunnel the client would have asked for:
 *
 *  - a synthetic address that the DNS stub handed out stands for its
 *    name: the request is "CONNECT name:port" and goes through the same
 *    steps as one (tunnel.c, upstream.c): the rules, the proxy's own
 *    resolution of the name, the check of every answer, the pinned
 *    address, then the first flight, whose SNI, or for HTTP every
 *    request's Host, must be that name;
 *  - any other address (one the agent did not get from the stub, a
 *    synthetic one never handed out) is a request for that IP literal,
 *    which only address rules can allow and the special-purpose checks
 *    judge like any literal;
 *  - a connection with no original destination (made to the listener's
 *    own address: loopback is never redirected) is refused and recorded.
 *
 * Since no HTTP exchange with the proxy exists, a deny before the first
 * flight closes the connection (the receipt says why); once the first
 * flight is HTTP, the requests inside are answered as in a CONNECT
 * tunnel (403 with X-Airlock-Rule for a Host that is not the name).
 *
 * Should: give the client exactly what a CONNECT to the same name and
 * port would. Mustn't: trust anything the client sends to name its
 * destination (the name comes only from the stub's table, written by the
 * supervisor and read-only here), write a 200 or any other bytes the
 * client did not ask for.
 */
#include "answer.h"
#include "conn.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dnsstub.h"
#include "transparent.h"
#include "util.h"

static void refuse(struct conn *c, const char *rule, const char *reason)
{
	struct verdict v;

	verdict_set(&v, VERDICT_FAIL, 0, rule, reason);
	(void)answer_apply(c, &v);
}

void tlisten_begin(struct conn *c)
{
	char name[HOSTNAME_MAX + 1];
	struct addr dst;
	uint16_t port = 0;
	int r;

	c->transparent = true;
	(void)util_strlcpy(c->method, "CONNECT", sizeof(c->method));
	r = transparent_original_dst(c->client.fd, &dst, &port);
	if (r < 0) {
		char reason[128];

		snprintf(reason, sizeof(reason),
			 "a connection to the transparent listener without an "
			 "original destination (%s)",
			 r == -ENOENT ? "not redirected" : strerror(-r));
		refuse(c, "transparent.no-destination", reason);
		return;
	}
	c->orig_dst = dst;
	c->port = port;
	memset(&c->target, 0, sizeof(c->target));
	if (c->p->names && dnsstub_table_lookup_addr(c->p->names, &dst, name)) {
		/* The stub normalised the name before it gave out the
		 * address; normalising again only refuses a table that was
		 * not written by it. */
		if (hostname_normalise(name, strlen(name), &c->target) != HOSTNAME_OK ||
		    c->target.is_addr) {
			refuse(c, "transparent.bad-name",
			       "the table of synthetic addresses holds an invalid name");
			return;
		}
	} else {
		c->target.is_addr = true;
		c->target.addr = dst;
		addr_format(&dst, c->target.name, sizeof(c->target.name));
	}
	c->target_known = true;
	tunnel_begin(c);
}
